//! Huffman-coded JPEGs checked to their last block without decoding a pixel, and their DC
//! picture (one sample per 8×8 block) for a thumbnail.
//!
//! A JPEG a PDF embeds as it is must still be whole: a cut file with an end-of-image marker
//! appended decodes "successfully" in most decoders (the missing blocks come out grey), so a
//! full decode proves nothing and costs most of an import. Here the markers are walked from
//! start-of-image to end-of-image with every segment length checked, every scan's
//! entropy-coded data is Huffman-decoded to exactly the number of blocks the frame declares
//! (restart markers in order), and nothing else is done with the coefficients but keep each
//! block's DC one — which is the block's mean, so the DC picture is the image at 1/8 scale,
//! box-filtered, for free (T.81 A.3.3: F(0,0) = 8 × the mean, before the level shift).
//! Baseline, extended and progressive frames at 8 bits, as `DCTDecode` takes them.

use crate::tools::jpeg::{self, ComponentSpec, FrameGeometry, ScanHeader as Scan, be16};

type Res<T> = std::result::Result<T, String>;

fn fail<T>(m: impl Into<String>) -> Res<T> {
    Err(m.into())
}

/// What the check of a JPEG yields.
pub struct Checked {
    /// Pixels across.
    pub width: u32,
    /// Pixels down.
    pub height: u32,
    /// The picture at 1/8 scale (each side rounded up), gray or RGB as the file's colours say.
    pub dc_image: image::DynamicImage,
}

/// Bits looked up in one step; longer codes take the slow path.
const FAST_BITS: u32 = 10;

/// A Huffman table ready for decoding (T.81 C and F.2.2.3).
#[derive(Clone)]
struct Table {
    /// For each `FAST_BITS`-bit prefix: code length << 8 | symbol, or 0 for a longer code.
    fast: Box<[u16; 1 << FAST_BITS]>,
    /// For sequential AC decoding, per prefix: the bits the symbol and its extra bits take
    /// (low byte) and how far it moves along the block (`ADVANCE` units; 0 for end of block),
    /// `PLACES` when it sets a coefficient; 0 for a longer code.
    skip_fast: Box<[u16; 1 << FAST_BITS]>,
    /// For sequential AC decoding (AC tables only), per `GROUP_BITS`-bit prefix: every whole
    /// symbol with its extra bits that fits, up to and including an end of block (see
    /// [`group_entry`]); 0 when not even one fits.
    groups: Vec<u32>,
    /// The largest code of each length (1-16), or -1 for none.
    maxcode: [i32; 17],
    /// Where each length's symbols start in `values`, less the first code of that length.
    delta: [i32; 17],
    values: Vec<u8>,
}

/// In a `skip_fast` entry: the shift of the advance along the block.
const ADVANCE: u16 = 8;
/// In a `skip_fast` entry: the symbol sets a coefficient (not a run of 16 zeros).
const PLACES: u16 = 0x8000;

/// Bits looked up at once to skip several sequential AC symbols.
const GROUP_BITS: u32 = 12;
/// In a `groups` entry: the group ends with an end of block.
const GROUP_EOB: u32 = 1 << 11;

/// The `groups` entry for a prefix of `GROUP_BITS` bits: bits used (low 4), how far the
/// symbols move along the block (bits 4-10), `GROUP_EOB`.
fn group_entry(t: &Table, prefix: u32) -> u32 {
    let (mut used, mut advance) = (0u32, 0u32);
    loop {
        let left = GROUP_BITS - used;
        // the next code, if it lies whole in what is left: the fast table looked up with the
        // bits after it as zeros (codes longer than FAST_BITS end the group)
        let window = (prefix << used) & ((1 << GROUP_BITS) - 1);
        let entry = t.fast[(window >> (GROUP_BITS - FAST_BITS)) as usize];
        let len = u32::from(entry >> 8);
        if entry == 0 || len > left {
            break;
        }
        let sym = entry as u8;
        let (r, s) = (u32::from(sym >> 4), u32::from(sym & 15));
        if len + s > left {
            break;
        }
        used += len + s;
        match (r, s) {
            (15, 0) => advance += 16,
            (_, 0) => return used | advance << 4 | GROUP_EOB,
            _ => advance += r + 1,
        }
    }
    used | advance << 4
}

/// A sequential AC symbol's `skip_fast` entry, from its code length.
fn skip_entry(len: u32, sym: u8) -> u16 {
    let (r, s) = (u16::from(sym >> 4), u16::from(sym & 15));
    let skip = len as u16 + s;
    match (r, s) {
        (15, 0) => (16 << ADVANCE) | skip,
        (_, 0) => skip,
        _ => PLACES | ((r + 1) << ADVANCE) | skip,
    }
}

impl Table {
    fn new(counts: &[u8; 16], values: &[u8], ac: bool) -> Res<Table> {
        let mut fast = Box::new([0u16; 1 << FAST_BITS]);
        let mut skip_fast = Box::new([0u16; 1 << FAST_BITS]);
        let mut maxcode = [-1i32; 17];
        let mut delta = [0i32; 17];
        let mut code = 0u32;
        let mut k = 0usize;
        for len in 1..=16u32 {
            let n = counts[len as usize - 1] as usize;
            delta[len as usize] = k as i32 - code as i32;
            for _ in 0..n {
                if code >= 1 << len {
                    return fail("a Huffman table has more codes than fit");
                }
                if len <= FAST_BITS {
                    let shift = FAST_BITS - len;
                    let first = (code << shift) as usize;
                    let entry = ((len as u16) << 8) | u16::from(values[k]);
                    fast[first..first + (1 << shift)].fill(entry);
                    skip_fast[first..first + (1 << shift)].fill(skip_entry(len, values[k]));
                }
                code += 1;
                k += 1;
            }
            if n > 0 {
                maxcode[len as usize] = code as i32 - 1;
            }
            code <<= 1;
        }
        let mut table = Table {
            fast,
            skip_fast,
            groups: Vec::new(),
            maxcode,
            delta,
            values: values.to_vec(),
        };
        if ac {
            table.groups = (0..1 << GROUP_BITS)
                .map(|prefix| group_entry(&table, prefix))
                .collect();
        }
        Ok(table)
    }

    /// A code longer than `FAST_BITS` from the 16 bits ahead: its length and symbol.
    #[cold]
    fn slow(&self, code16: u32) -> Option<(u32, u8)> {
        (FAST_BITS + 1..=16).find_map(|len| {
            let code = (code16 >> (16 - len)) as i32;
            (code <= self.maxcode[len as usize]).then(|| {
                let at = (self.delta[len as usize] + code) as usize;
                self.values.get(at).map(|v| (len, *v))
            })?
        })
    }
}

/// Reads the bits of one scan's entropy-coded data, taking out stuffed zero bytes and stopping
/// at a marker. Past a marker it reads zero bits, counted, so running past the data is seen.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    acc: u64,
    /// Bits in `acc`, the made-up ones included.
    n: u32,
    /// Made-up bits added to `acc` after the data stopped.
    made_up: u32,
    at_marker: bool,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8], pos: usize) -> Self {
        Bits {
            data,
            pos,
            acc: 0,
            n: 0,
            made_up: 0,
            at_marker: false,
        }
    }

    /// Fills `acc` to more than 56 bits.
    #[inline(always)]
    fn refill(&mut self) {
        // Fast path: eight bytes ahead without a 0xFF are taken whole.
        if !self.at_marker && self.pos + 8 <= self.data.len() {
            let word = u64::from_be_bytes(self.data[self.pos..self.pos + 8].try_into().unwrap());
            // a byte is 0xFF when all its bits are set: test each byte's high bit after adding 1
            let ff = ((word & 0x7F7F_7F7F_7F7F_7F7F) + 0x0101_0101_0101_0101)
                & word
                & 0x8080_8080_8080_8080;
            if ff == 0 {
                let take = (63 - self.n) / 8;
                self.acc |= (word >> (64 - 8 * take)) << (64 - 8 * take - self.n);
                self.n += 8 * take;
                self.pos += take as usize;
                return;
            }
        }
        while self.n <= 56 {
            let byte = if self.at_marker {
                self.made_up += 8;
                0
            } else {
                match self.data.get(self.pos) {
                    Some(&0xFF) if self.data.get(self.pos + 1) == Some(&0) => {
                        self.pos += 2;
                        0xFF
                    }
                    Some(&0xFF) | None => {
                        self.at_marker = true;
                        self.made_up += 8;
                        0
                    }
                    Some(&b) => {
                        self.pos += 1;
                        b
                    }
                }
            };
            self.acc |= u64::from(byte) << (56 - self.n);
            self.n += 8;
        }
    }

    #[inline(always)]
    fn ensure(&mut self, bits: u32) {
        if self.n < bits {
            self.refill();
        }
    }

    #[inline(always)]
    fn peek(&self, bits: u32) -> u32 {
        (self.acc >> (64 - bits)) as u32
    }

    #[inline(always)]
    fn skip(&mut self, bits: u32) {
        self.acc <<= bits;
        self.n -= bits;
    }

    /// `bits` bits as a number (at most 16; `ensure` first).
    #[inline(always)]
    fn take(&mut self, bits: u32) -> u32 {
        if bits == 0 {
            return 0;
        }
        let v = self.peek(bits);
        self.skip(bits);
        v
    }

    /// A magnitude of category `s` with its sign (T.81 F.2.2.1 EXTEND).
    #[inline(always)]
    fn signed(&mut self, s: u32) -> i32 {
        let v = self.take(s) as i32;
        if s > 0 && v < 1 << (s - 1) {
            v - (1 << s) + 1
        } else {
            v
        }
    }

    /// One symbol (`ensure(32)` first: a code and its extra bits fit).
    #[inline(always)]
    fn symbol(&mut self, t: &Table) -> Res<u8> {
        let entry = t.fast[self.peek(FAST_BITS) as usize];
        if entry != 0 {
            self.skip(u32::from(entry >> 8));
            return Ok(entry as u8);
        }
        let (len, sym) = t.slow(self.peek(16)).ok_or_else(bad_code)?;
        self.skip(len);
        Ok(sym)
    }

    /// Skips one sequential AC symbol and its extra bits (`ensure(32)` first); returns its
    /// `skip_fast` entry.
    #[inline(always)]
    fn skip_ac(&mut self, t: &Table) -> Res<u16> {
        let mut entry = t.skip_fast[self.peek(FAST_BITS) as usize];
        if entry == 0 {
            let (len, sym) = t.slow(self.peek(16)).ok_or_else(bad_code)?;
            entry = skip_entry(len, sym);
        }
        self.skip(u32::from(entry & 0xFF));
        Ok(entry)
    }

    /// Whether the decoding has used bits the data did not have.
    fn ran_out(&self) -> bool {
        self.made_up > self.n
    }

    /// Where the next marker is, from what was read: the bytes left between the last block and
    /// it are skipped (encoders pad with at most a few bits; some leave a stray byte).
    fn next_marker(&self) -> usize {
        let mut i = self.pos;
        while i + 1 < self.data.len()
            && !(self.data[i] == 0xFF && self.data[i + 1] != 0 && self.data[i + 1] != 0xFF)
        {
            i += 1;
        }
        i
    }

    /// Whole bytes of data left between the last block decoded and the marker at `marker`:
    /// those read ahead and unused, and those never read.
    fn left_over(&self, marker: usize) -> usize {
        (self.n.saturating_sub(self.made_up) / 8) as usize + marker.saturating_sub(self.pos)
    }

    /// Starts again after the data at `pos`.
    fn restart_at(&mut self, pos: usize) {
        *self = Bits::new(self.data, pos);
    }
}

/// A frame component and what the check keeps of it.
struct Component {
    spec: ComponentSpec,
    /// Each block's DC coefficient, quantised.
    dc: Vec<i16>,
    /// For progressive frames: which coefficients of each block are non-zero so far (bit k
    /// for zigzag index k), which refinement scans need.
    nonzero: Vec<u64>,
    /// Whether a scan has carried its DC coefficients.
    dc_seen: bool,
    /// Per coefficient (zigzag order), the bit position its last scan brought it to, or -1
    /// before its first: each scan must move on (T.81 G.1.1.1.1), so none can be repeated.
    sent: [i8; 64],
}

/// The frame being checked.
struct Frame {
    geo: FrameGeometry,
    comps: Vec<Component>,
}

impl Frame {
    fn new(body: &[u8], progressive: bool) -> Res<Frame> {
        let (geo, specs) = jpeg::parse_frame(body, progressive)?;
        let comps = specs
            .into_iter()
            .map(|spec| Component {
                dc: vec![0; spec.blocks()],
                nonzero: if progressive {
                    vec![0; spec.blocks()]
                } else {
                    Vec::new()
                },
                dc_seen: false,
                sent: [-1; 64],
                spec,
            })
            .collect();
        Ok(Frame { geo, comps })
    }
}

fn bad_code() -> String {
    "the image data holds a code no table has (damaged?)".to_string()
}

/// Walks a JPEG from start to end of image and decodes every scan's entropy-coded data to the
/// declared number of blocks; fails, saying what is wrong, on anything cut short or damaged.
/// The caller has checked the frame's size against the image budget: memory is 2 bytes per
/// block (10 for progressive frames).
pub fn check(bytes: &[u8]) -> Res<Checked> {
    check_until(bytes, &|| false)
}

/// [`check`], giving up (with an error) once `stop` says so: it is asked every few thousand
/// blocks, so a cancelled or timed-out import ends promptly.
pub fn check_until(bytes: &[u8], stop: &(dyn Fn() -> bool + Sync)) -> Res<Checked> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return fail("not a JPEG file (no start-of-image marker)");
    }
    let mut dc_tables: [Option<Table>; 4] = Default::default();
    let mut ac_tables: [Option<Table>; 4] = Default::default();
    let mut quant_dc = [0u16; 4];
    let mut quant_seen = [false; 4];
    let mut restart_interval = 0usize;
    let mut frame: Option<Frame> = None;
    let mut adobe_transform = None;
    let mut jfif = false;
    let mut scans = 0;
    let mut work = 0usize;
    let mut pos = 2;
    loop {
        let marker;
        (pos, marker) = jpeg::marker_at(bytes, pos)?;
        match marker {
            0xD9 => break,
            // Restart markers after a scan's last interval, and TEM: no segment follows.
            0xD0..=0xD7 | 0x01 => {
                pos += 2;
                continue;
            }
            0xD8 => return fail("a second start-of-image marker (damaged?)"),
            _ => {}
        }
        let (end, body) = jpeg::segment_at(bytes, pos)?;
        match marker {
            0xC4 => read_dht(body, &mut dc_tables, &mut ac_tables)?,
            0xDB => {
                let mut at = 0;
                while at < body.len() {
                    let (precision, id) = (body[at] >> 4, (body[at] & 0x0F) as usize);
                    let size = if precision == 0 { 64 } else { 128 };
                    if id > 3 || precision > 1 || at + 1 + size > body.len() {
                        return fail("a quantisation table is invalid");
                    }
                    quant_dc[id] = if precision == 0 {
                        u16::from(body[at + 1])
                    } else {
                        u16::from_be_bytes([body[at + 1], body[at + 2]])
                    };
                    quant_seen[id] = true;
                    at += 1 + size;
                }
            }
            0xDD => restart_interval = be16(body, 0)?,
            0xE0 if body.starts_with(b"JFIF\0") => jfif = true,
            0xEE if body.starts_with(b"Adobe") && body.len() >= 12 => {
                adobe_transform = Some(body[11]);
            }
            0xC0..=0xC2 => {
                if frame.is_some() {
                    return fail("the JPEG has more than one frame");
                }
                frame = Some(Frame::new(body, marker == 0xC2)?);
            }
            0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => {
                return fail(format!(
                    "the frame type (SOF{}) is not one a PDF embeds as it is",
                    marker - 0xC0
                ));
            }
            0xDA => {
                let f = frame
                    .as_mut()
                    .ok_or("the image data starts before any frame header")?;
                let specs: Vec<ComponentSpec> = f.comps.iter().map(|c| c.spec).collect();
                let scan = jpeg::parse_scan(body, f.geo.progressive, &specs)?;
                for &(ci, _, _) in &scan.comps {
                    let c = &mut f.comps[ci];
                    if !quant_seen[c.spec.quant] {
                        return fail("a component's quantisation table is missing");
                    }
                    if scan.ss == 0 {
                        if scan.ah > 0 && !c.dc_seen {
                            return fail("a scan refines DC coefficients never sent");
                        }
                        c.dc_seen = true;
                    }
                    progress(c, &scan)?;
                }
                // a picture needs a few passes over its blocks; thousands of scans of nothing
                // but end-of-block runs cost minutes (a "scan bomb")
                work += scan_blocks(f, &scan);
                if work > MAX_PASSES * total_blocks(f) {
                    return fail(format!(
                        "the JPEG has more scans than any picture needs ({} so far); refused \
                         as a likely decompression bomb",
                        scans + 1
                    ));
                }
                let tables = Tables {
                    dc: &dc_tables,
                    ac: &ac_tables,
                };
                pos = decode_scan(f, &scan, &tables, bytes, end, restart_interval, stop)?;
                scans += 1;
                continue;
            }
            _ => {} // APPn, COM, DNL and others: lengths checked, nothing to keep
        }
        pos = end;
    }
    let frame = frame.ok_or("the JPEG has no frame header")?;
    if scans == 0 {
        return fail("the JPEG has no image data");
    }
    if let Some(c) = frame.comps.iter().find(|c| !c.dc_seen) {
        return fail(format!(
            "component {} of the JPEG has no image data (damaged?)",
            c.spec.id
        ));
    }
    let colour = Colour::of(&frame, adobe_transform, jfif);
    Ok(Checked {
        width: frame.geo.width as u32,
        height: frame.geo.height as u32,
        dc_image: dc_image(&frame, &quant_dc, colour),
    })
}

struct Tables<'a> {
    dc: &'a [Option<Table>; 4],
    ac: &'a [Option<Table>; 4],
}

/// The state one scan carries from block to block.
struct ScanState {
    pred: [i32; 4],
    eobrun: u32,
}

/// Decodes one scan starting at `start`; returns where the marker after its data is.
/// How many passes over all of a frame's blocks its scans may make together.
const MAX_PASSES: usize = 64;

/// The blocks that hold samples, over all components.
fn total_blocks(f: &Frame) -> usize {
    f.comps
        .iter()
        .map(|c| c.spec.real_w * c.spec.real_h)
        .sum::<usize>()
        .max(1)
}

/// The blocks a scan codes.
fn scan_blocks(f: &Frame, scan: &Scan) -> usize {
    if let [(ci, _, _)] = scan.comps[..] {
        let c = &f.comps[ci].spec;
        return c.real_w * c.real_h;
    }
    let per_unit: usize = scan
        .comps
        .iter()
        .map(|&(ci, _, _)| f.comps[ci].spec.h * f.comps[ci].spec.v)
        .sum();
    f.geo.mcus_x * f.geo.mcus_y * per_unit
}

/// Notes what a scan sends of a component; a scan that sends nothing new is refused (T.81
/// G.1.1.1.1: a band's first scan, then refinements one bit at a time; a sequential frame
/// codes each component once).
fn progress(c: &mut Component, scan: &Scan) -> Res<()> {
    let repeated = || -> Res<()> {
        fail(format!(
            "a scan sends coefficients of component {} that earlier scans already sent \
             (damaged, or a decompression bomb)",
            c.spec.id
        ))
    };
    let band = scan.ss..=scan.se;
    let (ah, al) = (scan.ah as i8, scan.al as i8);
    let ok = if scan.ah == 0 {
        c.sent[band.clone()].iter().all(|s| *s < 0)
    } else {
        al == ah - 1 && c.sent[band.clone()].iter().all(|s| *s == ah)
    };
    if !ok {
        return repeated();
    }
    c.sent[band].iter_mut().for_each(|s| *s = al);
    Ok(())
}

fn decode_scan(
    f: &mut Frame,
    scan: &Scan,
    tables: &Tables,
    bytes: &[u8],
    start: usize,
    restart_interval: usize,
    stop: &(dyn Fn() -> bool + Sync),
) -> Res<usize> {
    let mut bits = Bits::new(bytes, start);
    let mut state = ScanState {
        pred: [0; 4],
        eobrun: 0,
    };
    // A scan of one component codes its blocks one by one, over the part that holds samples;
    // an interleaved one codes units of h × v blocks of each component, over the padded grid.
    let single = scan.comps.len() == 1;
    let (units_x, units_y) = if single {
        let c = &f.comps[scan.comps[0].0].spec;
        (c.real_w, c.real_h)
    } else {
        (f.geo.mcus_x, f.geo.mcus_y)
    };
    let units = units_x * units_y;
    let mut restarts = 0u32;
    for unit in 0..units {
        if unit % 4096 == 4095 && stop() {
            return fail("stopped (cancelled or out of time)");
        }
        if restart_interval > 0 && unit > 0 && unit % restart_interval == 0 {
            let at = bits.next_marker();
            leftover(&bits, at)?;
            let expected = 0xD0 + (restarts % 8) as u8;
            match bytes.get(at + 1) {
                Some(&m) if m == expected => {}
                Some(0xD0..=0xD7) => {
                    return fail("a restart marker is out of order: image data is missing");
                }
                _ => return Err(stopped(unit, units)),
            }
            restarts += 1;
            bits.restart_at(at + 2);
            state = ScanState {
                pred: [0; 4],
                eobrun: 0,
            };
        }
        let (ux, uy) = (unit % units_x, unit / units_x);
        for (sc, &(ci, dc, ac)) in scan.comps.iter().enumerate() {
            let c = &mut f.comps[ci];
            let (bw, bh) = if single { (1, 1) } else { (c.spec.h, c.spec.v) };
            for v in 0..bh {
                for h in 0..bw {
                    let index = (uy * bh + v) * c.spec.grid_w + ux * bw + h;
                    let at = (index, sc, dc, ac);
                    block(
                        &mut bits,
                        c,
                        at,
                        scan,
                        tables,
                        &mut state,
                        f.geo.progressive,
                    )?;
                }
            }
        }
        if bits.ran_out() {
            return Err(stopped(unit, units));
        }
    }
    scan_end(&bits, bytes)
}

/// Most bytes of data an interval may leave unused before its marker: encoders pad the last
/// byte with bits, and a few write a stray byte; more means the data went out of step with the
/// blocks (damaged) or holds more than the frame declares.
const MAX_LEFT_OVER: usize = 16;

/// Where the marker after a scan's data is, once the data is known to be used up.
fn scan_end(bits: &Bits, bytes: &[u8]) -> Res<usize> {
    let at = bits.next_marker();
    if at + 1 >= bytes.len() {
        return fail("the file ends inside the image data (cut short?)");
    }
    leftover(bits, at)?;
    Ok(at)
}

fn leftover(bits: &Bits, marker: usize) -> Res<()> {
    let extra = bits.left_over(marker);
    if extra > MAX_LEFT_OVER {
        return fail(format!(
            "{extra} bytes of image data are left over after the last block: the data is \
             damaged or does not match the frame"
        ));
    }
    Ok(())
}

fn stopped(unit: usize, units: usize) -> String {
    format!(
        "the image data ends after {unit} of the {units} block groups its header declares: \
         the file was cut short or damaged"
    )
}

/// A table a scan names, which must have been defined before it.
#[inline]
fn defined(t: &Option<Table>) -> Res<&Table> {
    t.as_ref()
        .ok_or_else(|| "a scan uses a Huffman table that was never defined".to_string())
}

/// Decodes one block of a scan: the block's index in the component's grid, and the scan
/// component's place in the scan and DC and AC table numbers.
#[inline(always)]
fn block(
    bits: &mut Bits,
    c: &mut Component,
    (index, sc, dc, ac): (usize, usize, usize, usize),
    scan: &Scan,
    tables: &Tables,
    state: &mut ScanState,
    progressive: bool,
) -> Res<()> {
    if !progressive {
        let (dct, act) = (defined(&tables.dc[dc])?, defined(&tables.ac[ac])?);
        bits.ensure(32);
        let s = u32::from(bits.symbol(dct)?);
        if s > 11 {
            return fail("a DC difference is out of range (damaged?)");
        }
        // kept to 16 bits, as coefficients are: damaged data cannot overflow it
        state.pred[sc] = i32::from(state.pred[sc].wrapping_add(bits.signed(s)) as i16);
        c.dc[index] = state.pred[sc] as i16;
        let mut k = 1u32;
        while k < 64 {
            bits.ensure(32);
            // several symbols at once, unless the block may end inside them (a symbol after
            // its 64th coefficient is the next block's)
            let group = act.groups[bits.peek(GROUP_BITS) as usize];
            let (used, advance) = (group & 0xF, (group >> 4) & 0x7F);
            if used != 0 && (k + advance < 64 || (k + advance == 64 && group & GROUP_EOB == 0)) {
                bits.skip(used);
                k += advance;
                if group & GROUP_EOB != 0 {
                    break;
                }
                continue;
            }
            let entry = bits.skip_ac(act)?;
            let advance = u32::from((entry & !PLACES) >> ADVANCE);
            if advance == 0 {
                break;
            }
            k += advance;
            if k > 64 && entry & PLACES != 0 {
                return fail("a block has more than 64 coefficients (damaged?)");
            }
        }
        return Ok(());
    }
    if scan.ss == 0 {
        bits.ensure(32);
        if scan.ah == 0 {
            let s = u32::from(bits.symbol(defined(&tables.dc[dc])?)?);
            if s > 11 {
                return fail("a DC difference is out of range (damaged?)");
            }
            state.pred[sc] = i32::from(state.pred[sc].wrapping_add(bits.signed(s)) as i16);
            c.dc[index] = (state.pred[sc] << scan.al) as i16;
        } else if bits.take(1) == 1 {
            c.dc[index] |= 1 << scan.al;
        }
        return Ok(());
    }
    let act = defined(&tables.ac[ac])?;
    let nz = &mut c.nonzero[index];
    if scan.ah == 0 {
        // first pass over a band (T.81 G.1.2.2)
        if state.eobrun > 0 {
            state.eobrun -= 1;
            return Ok(());
        }
        let mut k = scan.ss;
        while k <= scan.se {
            bits.ensure(32);
            let sym = bits.symbol(act)?;
            let (r, s) = (usize::from(sym >> 4), u32::from(sym & 15));
            if s == 0 {
                if r < 15 {
                    state.eobrun = (1 << r) + bits.take(r as u32) - 1;
                    break;
                }
                k += 16;
                continue;
            }
            k += r;
            if k > scan.se {
                return fail("a coefficient lies outside its scan's band (damaged?)");
            }
            bits.skip(s);
            *nz |= 1 << k;
            k += 1;
        }
        return Ok(());
    }
    // refinement of a band (T.81 G.1.2.3), as libjpeg decodes it
    let mut k = scan.ss;
    if state.eobrun == 0 {
        while k <= scan.se {
            bits.ensure(32);
            let sym = bits.symbol(act)?;
            let (mut r, s) = (i32::from(sym >> 4), sym & 15);
            if s != 0 {
                if s != 1 {
                    return fail("a refinement scan holds a bad code (damaged?)");
                }
                bits.skip(1); // the new coefficient's sign
            } else if r != 15 {
                state.eobrun = (1 << r) + bits.take(r as u32);
                break;
            }
            while k <= scan.se {
                if *nz & (1 << k) != 0 {
                    bits.ensure(1);
                    bits.skip(1); // a correction bit
                } else {
                    r -= 1;
                    if r < 0 {
                        break;
                    }
                }
                k += 1;
            }
            if s != 0 {
                if k > scan.se {
                    return fail("a coefficient lies outside its scan's band (damaged?)");
                }
                *nz |= 1 << k;
            }
            k += 1;
        }
    }
    if state.eobrun > 0 {
        while k <= scan.se {
            if *nz & (1 << k) != 0 {
                bits.ensure(1);
                bits.skip(1);
            }
            k += 1;
        }
        state.eobrun -= 1;
    }
    Ok(())
}

/// How the components become colours (what a PDF's `DCTDecode` does with them).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Colour {
    Gray,
    Rgb,
    YCbCr,
    /// CMYK; `inverted` when stored Adobe's way.
    Cmyk {
        inverted: bool,
    },
    /// YCbCr-coded CMY and a K, Adobe's way (stored inverted).
    Ycck,
}

impl Colour {
    fn of(frame: &Frame, adobe_transform: Option<u8>, jfif: bool) -> Colour {
        let ids: Vec<u8> = frame.comps.iter().map(|c| c.spec.id).collect();
        match frame.comps.len() {
            1 => Colour::Gray,
            3 => match adobe_transform {
                Some(0) => Colour::Rgb,
                Some(_) => Colour::YCbCr,
                None if !jfif && ids == b"RGB" => Colour::Rgb,
                None => Colour::YCbCr,
            },
            _ => match adobe_transform {
                Some(2) => Colour::Ycck,
                Some(_) => Colour::Cmyk { inverted: true },
                None => Colour::Cmyk { inverted: false },
            },
        }
    }
}

/// The picture at 1/8 scale from the blocks' DC coefficients.
fn dc_image(frame: &Frame, quant_dc: &[u16; 4], colour: Colour) -> image::DynamicImage {
    let (w, h) = (frame.geo.width.div_ceil(8), frame.geo.height.div_ceil(8));
    // Each component's blocks as samples (the mean, rounded, level-shifted), and for each
    // 1/8-scale column and row the block it falls in: components sampled less cover
    // hmax/h (vmax/v) luma-sized blocks each.
    let planes: Vec<(Vec<u8>, Vec<usize>, Vec<usize>)> = frame
        .comps
        .iter()
        .map(|c| {
            let q = i32::from(quant_dc[c.spec.quant]);
            let samples =
                c.dc.iter()
                    .map(|dc| (((i32::from(*dc) * q + 4) >> 3) + 128).clamp(0, 255) as u8)
                    .collect();
            let cols = (0..w)
                .map(|x| (x * c.spec.h / frame.geo.hmax).min(c.spec.grid_w - 1))
                .collect();
            let rows = (0..h)
                .map(|y| (y * c.spec.v / frame.geo.vmax).min(c.spec.grid_h - 1) * c.spec.grid_w)
                .collect();
            (samples, cols, rows)
        })
        .collect();
    // T.871's conversion in 16.16 fixed point, rounded
    let ycc = |y: u8, cb: u8, cr: u8| -> [u8; 3] {
        let (y, cb, cr) = (i32::from(y) << 16, i32::from(cb) - 128, i32::from(cr) - 128);
        let half = 1 << 15;
        [
            (y + 91_881 * cr + half) >> 16,
            (y - 22_554 * cb - 46_802 * cr + half) >> 16,
            (y + 116_130 * cb + half) >> 16,
        ]
        .map(|v| v.clamp(0, 255) as u8)
    };
    let channels = if colour == Colour::Gray { 1 } else { 3 };
    let mut out = Vec::with_capacity(w * h * channels);
    for y in 0..h {
        for x in 0..w {
            let mut s = [0u8; 4];
            for (v, (samples, cols, rows)) in s.iter_mut().zip(&planes) {
                *v = samples[rows[y] + cols[x]];
            }
            match colour {
                Colour::Gray => out.push(s[0]),
                Colour::Rgb => out.extend_from_slice(&s[..3]),
                Colour::YCbCr => out.extend_from_slice(&ycc(s[0], s[1], s[2])),
                Colour::Cmyk { inverted } => {
                    // ink amounts: stored as they are, or inverted (Adobe)
                    let ink = |v: u8| {
                        if inverted {
                            255 - u32::from(v)
                        } else {
                            u32::from(v)
                        }
                    };
                    let k = 255 - ink(s[3]);
                    out.extend([0, 1, 2].map(|i| ((255 - ink(s[i])) * k / 255) as u8));
                }
                Colour::Ycck => {
                    let k = u32::from(s[3]);
                    out.extend(ycc(s[0], s[1], s[2]).map(|v| (u32::from(v) * k / 255) as u8));
                }
            }
        }
    }
    let (w, h) = (w as u32, h as u32);
    // the buffer has exactly w × h × channels samples, so these cannot fail
    if channels == 1 {
        image::GrayImage::from_raw(w, h, out)
            .expect("one sample per pixel")
            .into()
    } else {
        image::RgbImage::from_raw(w, h, out)
            .expect("three samples per pixel")
            .into()
    }
}

/// Checks a lossless Huffman JPEG (SOF3) the same way: every scan's sample differences are
/// decoded to the count the frame declares (a cut file with an end marker appended is refused;
/// decoders pad it). Only the entropy layer: the samples are decoded elsewhere.
pub fn check_lossless(bytes: &[u8], stop: &(dyn Fn() -> bool + Sync)) -> Res<()> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return fail("not a JPEG file (no start-of-image marker)");
    }
    let mut tables: [Option<Table>; 4] = Default::default();
    let mut restart_interval = 0usize;
    let mut frame: Option<LosslessFrame> = None;
    let mut scanned: Vec<u8> = Vec::new();
    let mut pos = 2;
    loop {
        let marker;
        (pos, marker) = jpeg::marker_at(bytes, pos)?;
        match marker {
            0xD9 => break,
            0xD0..=0xD7 | 0x01 => {
                pos += 2;
                continue;
            }
            _ => {}
        }
        let (end, body) = jpeg::segment_at(bytes, pos)?;
        match marker {
            0xC4 => read_dht(body, &mut tables, &mut [None, None, None, None])?,
            0xDD => restart_interval = be16(body, 0)?,
            0xC3 => {
                if body.len() < 6 || !(2..=16).contains(&body[0]) {
                    return fail("the lossless frame header is invalid");
                }
                let (height, width, n) = (be16(body, 1)?, be16(body, 3)?, body[5] as usize);
                if width == 0 || height == 0 || !(1..=4).contains(&n) || body.len() < 6 + 3 * n {
                    return fail("the lossless frame header is invalid");
                }
                let comps: Vec<(u8, usize, usize)> = (0..n)
                    .map(|i| {
                        let c = &body[6 + 3 * i..9 + 3 * i];
                        (c[0], (c[1] >> 4) as usize, (c[1] & 0x0F) as usize)
                    })
                    .collect();
                if comps
                    .iter()
                    .any(|c| !(1..=4).contains(&c.1) || !(1..=4).contains(&c.2))
                {
                    return fail("a component has invalid sampling factors");
                }
                let hmax = comps.iter().map(|c| c.1).max().unwrap_or(1);
                let vmax = comps.iter().map(|c| c.2).max().unwrap_or(1);
                frame = Some(LosslessFrame {
                    width,
                    height,
                    hmax,
                    vmax,
                    comps,
                });
            }
            0xDA => {
                let LosslessFrame {
                    width,
                    height,
                    hmax,
                    vmax,
                    comps,
                } = frame
                    .as_ref()
                    .ok_or("the image data starts before any frame header")?;
                let n = *body.first().ok_or("the scan header is empty")? as usize;
                if n == 0 || n > 4 || body.len() < 1 + 2 * n + 3 {
                    return fail("the scan header is invalid");
                }
                // per scan component: its DC table and how many samples of it a unit holds
                let mut parts = Vec::with_capacity(n);
                for k in 0..n {
                    let (id, table) = (body[1 + 2 * k], (body[2 + 2 * k] >> 4) as usize);
                    let &(_, h, v) = comps
                        .iter()
                        .find(|c| c.0 == id)
                        .ok_or("a scan names a component the frame does not have")?;
                    if scanned.contains(&id) {
                        return fail("a scan codes a component an earlier scan coded");
                    }
                    scanned.push(id);
                    let t = tables
                        .get(table)
                        .and_then(Option::as_ref)
                        .ok_or("a scan uses a Huffman table that was never defined")?;
                    parts.push((t, if n == 1 { (1, (h, v)) } else { (h * v, (h, v)) }));
                }
                let units = if n == 1 {
                    let (h, v) = parts[0].1.1;
                    (width * h).div_ceil(*hmax) * (height * v).div_ceil(*vmax)
                } else {
                    width.div_ceil(*hmax) * height.div_ceil(*vmax)
                };
                let samples: Vec<(&Table, usize)> =
                    parts.iter().map(|(t, (count, _))| (*t, *count)).collect();
                pos = walk_lossless(bytes, end, &samples, units, restart_interval, stop)?;
                continue;
            }
            _ => {}
        }
        pos = end;
    }
    let comps = frame.ok_or("the JPEG has no frame header")?.comps;
    if let Some(c) = comps.iter().find(|c| !scanned.contains(&c.0)) {
        return fail(format!(
            "component {} of the JPEG has no image data (damaged?)",
            c.0
        ));
    }
    Ok(())
}

/// Reads a DHT segment's tables into the DC and AC slots they name.
fn read_dht(body: &[u8], dc: &mut [Option<Table>; 4], ac: &mut [Option<Table>; 4]) -> Res<()> {
    let mut at = 0;
    while at < body.len() {
        let class_id = body[at];
        let counts: &[u8; 16] = body
            .get(at + 1..at + 17)
            .and_then(|c| c.try_into().ok())
            .ok_or("a Huffman table segment is too short")?;
        let n: usize = counts.iter().map(|c| *c as usize).sum();
        let values = body
            .get(at + 17..at + 17 + n)
            .ok_or("a Huffman table segment is too short")?;
        if n > 256 || class_id & 0x0F > 3 || class_id >> 4 > 1 {
            return fail("a Huffman table is invalid");
        }
        let is_ac = class_id >> 4 == 1;
        let slots = if is_ac { &mut *ac } else { &mut *dc };
        slots[(class_id & 0x0F) as usize] = Some(Table::new(counts, values, is_ac)?);
        at += 17 + n;
    }
    Ok(())
}

/// A lossless frame header: pixel size, the largest sampling factors, and each component's
/// id and sampling factors.
struct LosslessFrame {
    width: usize,
    height: usize,
    hmax: usize,
    vmax: usize,
    comps: Vec<(u8, usize, usize)>,
}

/// Decodes one lossless scan's differences: `units` units of `samples` (table, count) each.
fn walk_lossless(
    bytes: &[u8],
    start: usize,
    samples: &[(&Table, usize)],
    units: usize,
    restart_interval: usize,
    stop: &(dyn Fn() -> bool + Sync),
) -> Res<usize> {
    let mut bits = Bits::new(bytes, start);
    let mut restarts = 0u32;
    for unit in 0..units {
        if unit % 65536 == 65535 && stop() {
            return fail("stopped (cancelled or out of time)");
        }
        if restart_interval > 0 && unit > 0 && unit % restart_interval == 0 {
            let at = bits.next_marker();
            leftover(&bits, at)?;
            match bytes.get(at + 1) {
                Some(&m) if m == 0xD0 + (restarts % 8) as u8 => {}
                Some(0xD0..=0xD7) => {
                    return fail("a restart marker is out of order: image data is missing");
                }
                _ => return Err(stopped(unit, units)),
            }
            restarts += 1;
            bits.restart_at(at + 2);
        }
        for &(table, count) in samples {
            for _ in 0..count {
                bits.ensure(32);
                let s = u32::from(bits.symbol(table)?);
                if s > 16 {
                    return fail("a sample difference is out of range (damaged?)");
                }
                if s < 16 {
                    bits.skip(s);
                }
            }
        }
        if bits.ran_out() {
            return Err(stopped(unit, units));
        }
    }
    scan_end(&bits, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/tests/fixtures/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    /// The shipped Huffman JPEGs: progressive with restart markers every 7 block groups,
    /// gray with a restart per row, baseline 4:4:4, a 4:2:0 one re-coded from arithmetic
    /// coding, and an Adobe CMYK one.
    const FIXTURES: [&str; 5] = [
        "progressive-restart.jpg",
        "gray-restart.jpg",
        "baseline-444.jpg",
        "arith-420.huffman.jpg",
        "cmyk-adobe.jpg",
    ];

    /// The mean of each 8×8 block of the full decode, as RGB.
    fn block_means(bytes: &[u8]) -> image::RgbImage {
        let full = image::load_from_memory(bytes).unwrap().to_rgb8();
        let (w, h) = (full.width().div_ceil(8), full.height().div_ceil(8));
        image::RgbImage::from_fn(w, h, |bx, by| {
            let mut sum = [0u32; 3];
            let mut n = 0;
            for y in by * 8..(by * 8 + 8).min(full.height()) {
                for x in bx * 8..(bx * 8 + 8).min(full.width()) {
                    let p = full.get_pixel(x, y);
                    (0..3).for_each(|i| sum[i] += u32::from(p[i]));
                    n += 1;
                }
            }
            image::Rgb(sum.map(|s| (s / n) as u8))
        })
    }

    #[test]
    fn whole_files_check_and_their_dc_picture_is_the_block_means() {
        for name in FIXTURES {
            let bytes = fixture(name);
            let checked = check(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            let info = crate::tools::jpeg::read_info(&bytes).unwrap();
            assert_eq!(
                (checked.width, checked.height),
                (u32::from(info.width), u32::from(info.height))
            );
            // Compared in luma: chroma sampled at half size averages over 16×16 pixels, so
            // sharp colour edges differ from 8×8 means in RGB. A DC mean is taken before the
            // decoder clamps each sample to 0-255, so ringing at hard edges (these files have
            // them) moves it by a few levels; garbage would be off by tens.
            let ours = image::DynamicImage::ImageRgb8(checked.dc_image.to_rgb8()).to_luma8();
            if name == "cmyk-adobe.jpg" {
                // the image crate reads no CMYK: compare with what the thumbnail test knows
                let rgb = checked.dc_image.to_rgb8();
                let p = rgb.get_pixel(rgb.width() / 4, rgb.height() / 4);
                assert!(p[0] > 200 && p[1] < 60 && p[2] < 60, "{p:?}");
                continue;
            }
            let means = image::DynamicImage::ImageRgb8(block_means(&bytes)).to_luma8();
            assert_eq!(ours.dimensions(), means.dimensions(), "{name}");
            let diff: u64 = ours
                .pixels()
                .zip(means.pixels())
                .map(|(a, b)| u64::from(a[0].abs_diff(b[0])))
                .sum();
            let mean_diff = diff as f64 / f64::from(ours.width() * ours.height());
            assert!(mean_diff < 6.0, "{name}: off by {mean_diff:.2} on average");
        }
    }

    #[test]
    fn a_cut_file_with_an_end_marker_appended_is_refused() {
        for name in FIXTURES {
            let bytes = fixture(name);
            for cut in [bytes.len() / 2, bytes.len() * 9 / 10, bytes.len() - 40] {
                let mut half = bytes[..cut].to_vec();
                let plain = check(&half).err().unwrap();
                assert!(plain.contains("cut short"), "{name} at {cut}: {plain}");
                half.extend_from_slice(&[0xFF, 0xD9]);
                let e = check(&half)
                    .err()
                    .unwrap_or_else(|| panic!("{name} at {cut}"));
                assert!(e.contains("cut short"), "{name} at {cut}: {e}");
            }
        }
    }

    /// A scan that sends what earlier scans sent (thousands of them made a minutes-long "scan
    /// bomb"), and data going on past the frame's last block, are refused.
    #[test]
    fn repeated_scans_and_left_over_data_are_refused() {
        let bytes = fixture("progressive-restart.jpg");
        let eoi = bytes.len() - 2;
        let last_sos = bytes.windows(2).rposition(|w| w == [0xFF, 0xDA]).unwrap();
        let mut twice = bytes[..eoi].to_vec();
        twice.extend_from_slice(&bytes[last_sos..eoi]);
        twice.extend_from_slice(&[0xFF, 0xD9]);
        let e = check(&twice).err().unwrap();
        assert!(e.contains("already sent"), "{e}");
        let baseline = fixture("baseline-444.jpg");
        let mut longer = baseline[..baseline.len() - 2].to_vec();
        longer.extend(std::iter::repeat_n(0x55, 100));
        longer.extend_from_slice(&[0xFF, 0xD9]);
        let e = check(&longer).err().unwrap();
        assert!(e.contains("left over"), "{e}");
        // a cancelled check stops (a 333×217 picture has under 4,096 units: a larger one)
        let img = image::RgbImage::from_fn(1024, 1024, |x, y| image::Rgb([x as u8, y as u8, 7]));
        let mut big = std::io::Cursor::new(Vec::new());
        img.write_to(&mut big, image::ImageFormat::Jpeg).unwrap();
        let e = check_until(big.get_ref(), &|| true).err().unwrap();
        assert!(e.contains("stopped"), "{e}");
    }

    /// Lossless files are walked to their last sample too: whole ones pass, cut ones do not.
    #[test]
    fn lossless_files_are_checked_to_their_last_sample() {
        for name in ["lossless-rgb.jpg", "lossless-12bit-gray.jpg"] {
            let whole = fixture(name);
            check_lossless(&whole, &|| false).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut half = whole[..whole.len() / 2].to_vec();
            half.extend_from_slice(&[0xFF, 0xD9]);
            let e = check_lossless(&half, &|| false)
                .err()
                .unwrap_or_else(|| panic!("{name}"));
            assert!(e.contains("cut short"), "{name}: {e}");
        }
    }

    #[test]
    fn restart_markers_out_of_order_are_refused() {
        let mut bytes = fixture("progressive-restart.jpg");
        let sos = bytes.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        let at = sos
            + bytes[sos..]
                .windows(2)
                .position(|w| w == [0xFF, 0xD1])
                .unwrap();
        bytes[at + 1] = 0xD3;
        let e = check(&bytes).err().unwrap();
        assert!(e.contains("restart marker"), "{e}");
    }

    #[test]
    fn damage_anywhere_is_an_error_or_a_picture_never_a_panic() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for name in FIXTURES {
            let bytes = fixture(name);
            for _ in 0..400 {
                let mut damaged = bytes.clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() % damaged.len() as u64) as usize;
                    damaged[at] = next() as u8;
                }
                let _ = check(&damaged);
            }
        }
    }

    #[test]
    fn other_codings_and_non_jpegs_are_named() {
        let e = check(&fixture("arith-420.jpg")).err().unwrap();
        assert!(e.contains("SOF9"), "{e}");
        assert!(check(b"\x89PNG....").is_err());
        assert!(
            check(&[0xFF, 0xD8, 0xFF, 0xD9])
                .err()
                .unwrap()
                .contains("no frame")
        );
    }

    #[test]
    fn an_encoder_made_file_of_odd_size_checks() {
        let img = image::RgbImage::from_fn(333, 97, |x, y| {
            image::Rgb([(x % 256) as u8, (y * 2) as u8, ((x + y) % 256) as u8])
        });
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
        let checked = check(out.get_ref()).unwrap();
        assert_eq!(
            (checked.dc_image.width(), checked.dc_image.height()),
            (42, 13)
        );
    }

    #[test]
    fn flat_pictures_come_out_exact() {
        for v in [0u8, 60, 128, 255] {
            let img = image::GrayImage::from_pixel(40, 24, image::Luma([v]));
            let mut out = std::io::Cursor::new(Vec::new());
            img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
            let gray = check(out.get_ref()).unwrap().dc_image.to_luma8();
            assert!(gray.pixels().all(|p| p[0] == v), "{v}: {gray:?}");
        }
        let colour = [200u8, 30, 90];
        let img = image::RgbImage::from_pixel(40, 24, image::Rgb(colour));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
        let decoded = image::load_from_memory(out.get_ref()).unwrap().to_rgb8();
        let rgb = check(out.get_ref()).unwrap().dc_image.to_rgb8();
        for p in rgb.pixels() {
            for i in 0..3 {
                assert!(p[i].abs_diff(decoded.get_pixel(20, 12)[i]) <= 1, "{p:?}");
            }
        }
    }
}

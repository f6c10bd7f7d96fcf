//! Arithmetic-coded JPEGs, re-coded with Huffman codes so they can be decoded and shown.
//!
//! Neither PDF readers nor the decoders lmcp uses read arithmetic coding (T.81 Annex D), though
//! it is part of the JPEG standard and some tools write it. The coding is only the entropy
//! layer: here the quantised DCT coefficients of every block are decoded from the arithmetic
//! scans (sequential, or progressive with refinement) and written out again as one baseline
//! Huffman scan with tables made for the image (T.81 Annex K.2), keeping the quantisation tables
//! and every APPn/COM segment (EXIF orientation, ICC profile, Adobe transform). No sample is
//! changed: the result decodes to exactly what the original does.

/// T.81 Table D.3: Qe, and the next states after an LPS (with the MPS switch in bit 7) and after
/// an MPS, packed as `qe << 16 | next_mps << 8 | switch << 7 | next_lps`. The last entry is a
/// fixed probability of one half, for sign bits.
const QE_TABLE: [u32; 114] = {
    const fn v(qe: u32, next_lps: u32, next_mps: u32, switch: u32) -> u32 {
        (qe << 16) | (next_mps << 8) | (switch << 7) | next_lps
    }
    [
        v(0x5a1d, 1, 1, 1),
        v(0x2586, 14, 2, 0),
        v(0x1114, 16, 3, 0),
        v(0x080b, 18, 4, 0),
        v(0x03d8, 20, 5, 0),
        v(0x01da, 23, 6, 0),
        v(0x00e5, 25, 7, 0),
        v(0x006f, 28, 8, 0),
        v(0x0036, 30, 9, 0),
        v(0x001a, 33, 10, 0),
        v(0x000d, 35, 11, 0),
        v(0x0006, 9, 12, 0),
        v(0x0003, 10, 13, 0),
        v(0x0001, 12, 13, 0),
        v(0x5a7f, 15, 15, 1),
        v(0x3f25, 36, 16, 0),
        v(0x2cf2, 38, 17, 0),
        v(0x207c, 39, 18, 0),
        v(0x17b9, 40, 19, 0),
        v(0x1182, 42, 20, 0),
        v(0x0cef, 43, 21, 0),
        v(0x09a1, 45, 22, 0),
        v(0x072f, 46, 23, 0),
        v(0x055c, 48, 24, 0),
        v(0x0406, 49, 25, 0),
        v(0x0303, 51, 26, 0),
        v(0x0240, 52, 27, 0),
        v(0x01b1, 54, 28, 0),
        v(0x0144, 56, 29, 0),
        v(0x00f5, 57, 30, 0),
        v(0x00b7, 59, 31, 0),
        v(0x008a, 60, 32, 0),
        v(0x0068, 62, 33, 0),
        v(0x004e, 63, 34, 0),
        v(0x003b, 32, 35, 0),
        v(0x002c, 33, 9, 0),
        v(0x5ae1, 37, 37, 1),
        v(0x484c, 64, 38, 0),
        v(0x3a0d, 65, 39, 0),
        v(0x2ef1, 67, 40, 0),
        v(0x261f, 68, 41, 0),
        v(0x1f33, 69, 42, 0),
        v(0x19a8, 70, 43, 0),
        v(0x1518, 72, 44, 0),
        v(0x1177, 73, 45, 0),
        v(0x0e74, 74, 46, 0),
        v(0x0bfb, 75, 47, 0),
        v(0x09f8, 77, 48, 0),
        v(0x0861, 78, 49, 0),
        v(0x0706, 79, 50, 0),
        v(0x05cd, 48, 51, 0),
        v(0x04de, 50, 52, 0),
        v(0x040f, 50, 53, 0),
        v(0x0363, 51, 54, 0),
        v(0x02d4, 52, 55, 0),
        v(0x025c, 53, 56, 0),
        v(0x01f8, 54, 57, 0),
        v(0x01a4, 55, 58, 0),
        v(0x0160, 56, 59, 0),
        v(0x0125, 57, 60, 0),
        v(0x00f6, 58, 61, 0),
        v(0x00cb, 59, 62, 0),
        v(0x00ab, 61, 63, 0),
        v(0x008f, 61, 32, 0),
        v(0x5b12, 65, 65, 1),
        v(0x4d04, 80, 66, 0),
        v(0x412c, 81, 67, 0),
        v(0x37d8, 82, 68, 0),
        v(0x2fe8, 83, 69, 0),
        v(0x293c, 84, 70, 0),
        v(0x2379, 86, 71, 0),
        v(0x1edf, 87, 72, 0),
        v(0x1aa9, 87, 73, 0),
        v(0x174e, 72, 74, 0),
        v(0x1424, 72, 75, 0),
        v(0x119c, 74, 76, 0),
        v(0x0f6b, 74, 77, 0),
        v(0x0d51, 75, 78, 0),
        v(0x0bb6, 77, 79, 0),
        v(0x0a40, 77, 48, 0),
        v(0x5832, 80, 81, 1),
        v(0x4d1c, 88, 82, 0),
        v(0x438e, 89, 83, 0),
        v(0x3bdd, 90, 84, 0),
        v(0x34ee, 91, 85, 0),
        v(0x2eae, 92, 86, 0),
        v(0x299a, 93, 87, 0),
        v(0x2516, 86, 71, 0),
        v(0x5570, 88, 89, 1),
        v(0x4ca9, 95, 90, 0),
        v(0x44d9, 96, 91, 0),
        v(0x3e22, 97, 92, 0),
        v(0x3824, 99, 93, 0),
        v(0x32b4, 99, 94, 0),
        v(0x2e17, 93, 86, 0),
        v(0x56a8, 95, 96, 1),
        v(0x4f46, 101, 97, 0),
        v(0x47e5, 102, 98, 0),
        v(0x41cf, 103, 99, 0),
        v(0x3c3d, 104, 100, 0),
        v(0x375e, 99, 93, 0),
        v(0x5231, 105, 102, 0),
        v(0x4c0f, 106, 103, 0),
        v(0x4639, 107, 104, 0),
        v(0x415e, 103, 99, 0),
        v(0x5627, 105, 106, 1),
        v(0x50e7, 108, 107, 0),
        v(0x4b85, 109, 103, 0),
        v(0x5597, 110, 109, 0),
        v(0x504f, 111, 107, 0),
        v(0x5a10, 110, 111, 1),
        v(0x5522, 112, 109, 0),
        v(0x59eb, 112, 111, 1),
        v(0x5a1d, 113, 113, 0),
    ]
};

/// Most zero bytes an interval may read past its data: the decoder's two-byte look-ahead and a
/// little slack (T.81 D.1.8: the encoder's flush makes the rest unnecessary).
const MAX_MADE_UP: usize = 8;

/// The state of the fixed one-half probability estimate.
const FIXED_HALF: u8 = 113;

use crate::tools::jpeg::{self, ComponentSpec, FrameGeometry, ScanHeader as Scan, be16};

type Res<T> = std::result::Result<T, String>;

fn fail<T>(m: impl Into<String>) -> Res<T> {
    Err(m.into())
}

/// One frame component and its coefficients, kept in zigzag order (the order both codings use).
struct Component {
    spec: ComponentSpec,
    blocks: Vec<[i16; 64]>,
}

/// The arithmetic decoder (T.81 D.2) over one scan's entropy-coded bytes.
struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    at_marker: bool,
    /// Zero bytes read past the end of the current interval's data. An encoder's final flush
    /// leaves the decoder needing at most a few; many more mean the data was cut short.
    made_up: usize,
    c: i64,
    a: i64,
    ct: i32,
}

impl<'a> Decoder<'a> {
    fn new(data: &'a [u8]) -> Self {
        Decoder {
            data,
            pos: 0,
            at_marker: false,
            made_up: 0,
            c: 0,
            a: 0,
            ct: -16,
        }
    }

    /// The next data byte; zeros once a marker is reached (T.81 D.2.6).
    fn byte(&mut self) -> i64 {
        if self.at_marker || self.pos >= self.data.len() {
            self.made_up += 1;
            return 0;
        }
        let b = self.data[self.pos];
        self.pos += 1;
        if b != 0xFF {
            return b as i64;
        }
        while self.data.get(self.pos) == Some(&0xFF) {
            self.pos += 1;
        }
        if self.data.get(self.pos) == Some(&0) {
            self.pos += 1;
            return 0xFF;
        }
        // A marker: leave it for the restart handling.
        self.pos -= 1;
        self.at_marker = true;
        self.made_up += 1;
        0
    }

    /// Skips to just past the next restart marker and starts afresh.
    /// Fails when the interval just decoded needed more data than it had.
    fn check_whole(&self) -> Res<()> {
        if self.made_up > MAX_MADE_UP {
            return fail("the image data ends before the picture does: the file was cut short");
        }
        Ok(())
    }

    fn restart(&mut self) -> Res<()> {
        self.check_whole()?;
        let mut i = self.pos;
        while i + 1 < self.data.len()
            && !(self.data[i] == 0xFF && (0xD0..=0xD7).contains(&self.data[i + 1]))
        {
            i += 1;
        }
        if i + 1 >= self.data.len() {
            return fail("a restart marker is missing");
        }
        self.pos = i + 2;
        self.at_marker = false;
        self.made_up = 0;
        self.c = 0;
        self.a = 0;
        self.ct = -16;
        Ok(())
    }

    /// Doubles `m` while the bins from `st` on say the magnitude category goes on (T.81 Figure
    /// F.23); returns it and the bin where that stopped.
    fn widen(&mut self, stats: &mut [u8], mut st: usize, mut m: i32) -> Res<(i32, usize)> {
        while self.decode(&mut stats[st]) != 0 {
            m <<= 1;
            if m == 0x8000 {
                return fail("a coefficient is out of range");
            }
            st += 1;
        }
        Ok((m, st))
    }

    /// The bits below `m`'s top bit, from one bin (T.81 Figure F.24), plus one: a magnitude.
    fn magnitude(&mut self, bin: &mut u8, m: i32) -> i32 {
        let mut v = m;
        let mut bit = m >> 1;
        while bit != 0 {
            if self.decode(bin) != 0 {
                v |= bit;
            }
            bit >>= 1;
        }
        v + 1
    }

    /// Decodes one binary decision with the adaptive estimate in `st` (T.81 D.2.4-D.2.5).
    fn decode(&mut self, st: &mut u8) -> u8 {
        while self.a < 0x8000 {
            self.ct -= 1;
            if self.ct < 0 {
                let data = self.byte();
                self.c = (self.c << 8) | data;
                self.ct += 8;
                if self.ct < 0 {
                    self.ct += 1;
                    if self.ct == 0 {
                        // The two first bytes are in: start the interval register.
                        self.a = 0x8000;
                    }
                }
            }
            self.a <<= 1;
        }
        let sv = *st;
        let entry = QE_TABLE[(sv & 0x7F) as usize];
        let next_lps = (entry & 0xFF) as u8;
        let next_mps = ((entry >> 8) & 0xFF) as u8;
        let qe = (entry >> 16) as i64;
        self.a -= qe;
        let temp = self.a << self.ct;
        let mut bit = sv >> 7;
        if self.c >= temp {
            self.c -= temp;
            if self.a < qe {
                *st = (sv & 0x80) ^ next_mps;
            } else {
                *st = (sv & 0x80) ^ next_lps;
                bit ^= 1;
            }
            self.a = qe;
        } else if self.a < 0x8000 {
            if self.a < qe {
                *st = (sv & 0x80) ^ next_lps;
                bit ^= 1;
            } else {
                *st = (sv & 0x80) ^ next_mps;
            }
        }
        bit
    }
}

/// Conditioning of the statistics (DAC marker; T.81 defaults otherwise).
#[derive(Clone, Copy)]
struct Conditioning {
    dc_l: [u8; 4],
    dc_u: [u8; 4],
    ac_k: [u8; 4],
}

/// The statistics areas of a scan (T.81 F.1.4.4).
struct Stats {
    dc: [[u8; 64]; 4],
    ac: [[u8; 256]; 4],
    fixed: u8,
}

impl Stats {
    fn new() -> Self {
        Stats {
            dc: [[0; 64]; 4],
            ac: [[0; 256]; 4],
            fixed: FIXED_HALF,
        }
    }
}

fn decode_dc_diff(
    d: &mut Decoder,
    stats: &mut [u8; 64],
    context: &mut usize,
    l: u8,
    u: u8,
) -> Res<i32> {
    let ctx = *context;
    if d.decode(&mut stats[ctx]) == 0 {
        *context = 0;
        return Ok(0);
    }
    let sign = d.decode(&mut stats[ctx + 1]) as usize;
    let mut st = ctx + 2 + sign;
    let mut m: i32 = d.decode(&mut stats[st]) as i32;
    if m != 0 {
        (m, st) = d.widen(stats, 20, m)?;
    }
    *context = if m < ((1i32 << l) >> 1) {
        0
    } else if m > ((1i32 << u) >> 1) {
        12 + sign * 4
    } else {
        4 + sign * 4
    };
    let v = d.magnitude(&mut stats[st + 14], m);
    Ok(if sign != 0 { -v } else { v })
}

/// AC coefficients `ss..=se` of a block, first pass (T.81 F.2.4.2); values shifted left by `al`.
fn decode_ac_first(
    d: &mut Decoder,
    stats: &mut [u8; 256],
    fixed: &mut u8,
    k_limit: u8,
    block: &mut [i16; 64],
    (ss, se, al): (usize, usize, u8),
) -> Res<()> {
    let mut k = ss;
    while k <= se {
        let mut st = 3 * (k - 1);
        if d.decode(&mut stats[st]) != 0 {
            break; // end of block
        }
        while d.decode(&mut stats[st + 1]) == 0 {
            st += 3;
            k += 1;
            if k > se {
                return fail("a block has more coefficients than it may");
            }
        }
        let sign = d.decode(fixed);
        st += 2;
        let mut m: i32 = d.decode(&mut stats[st]) as i32;
        if m != 0 && d.decode(&mut stats[st]) != 0 {
            let first = if k <= k_limit as usize { 189 } else { 217 };
            (m, st) = d.widen(stats, first, m << 1)?;
        }
        let v = d.magnitude(&mut stats[st + 14], m);
        let v = if sign != 0 { -v } else { v };
        block[k] = (v << al) as i16;
        k += 1;
    }
    Ok(())
}

/// A refinement pass over AC coefficients `ss..=se` (T.81 G.1.3.3).
fn decode_ac_refine(
    d: &mut Decoder,
    stats: &mut [u8; 256],
    fixed: &mut u8,
    block: &mut [i16; 64],
    (ss, se, al): (usize, usize, u8),
) -> Res<()> {
    let p1: i16 = 1 << al;
    let m1: i16 = -1 << al;
    // The end of block of the previous pass.
    let mut kex = se;
    while kex > 0 && block[kex] == 0 {
        kex -= 1;
    }
    let mut k = ss;
    while k <= se {
        let mut st = 3 * (k - 1);
        if k > kex && d.decode(&mut stats[st]) != 0 {
            break;
        }
        loop {
            let coef = &mut block[k];
            if *coef != 0 {
                if d.decode(&mut stats[st + 2]) != 0 {
                    *coef = coef.wrapping_add(if *coef < 0 { m1 } else { p1 });
                }
                break;
            }
            if d.decode(&mut stats[st + 1]) != 0 {
                *coef = if d.decode(fixed) != 0 { m1 } else { p1 };
                break;
            }
            st += 3;
            k += 1;
            if k > se {
                return fail("a block has more coefficients than it may");
            }
        }
        k += 1;
    }
    Ok(())
}

/// The frame being decoded.
struct Frame {
    geo: FrameGeometry,
    comps: Vec<Component>,
    restart_interval: usize,
    conditioning: Conditioning,
}

impl Frame {
    /// Decodes one scan into the components' blocks.
    fn decode_scan(&mut self, scan: &Scan, data: &[u8]) -> Res<()> {
        let mut d = Decoder::new(data);
        let mut stats = Stats::new();
        let mut last_dc = vec![0i32; scan.comps.len()];
        let mut dc_context = vec![0usize; scan.comps.len()];
        // Which blocks make up each MCU, in coding order: (scan component, block index).
        let units: Vec<Vec<(usize, usize)>> = if scan.comps.len() == 1 {
            let c = &self.comps[scan.comps[0].0];
            (0..c.spec.real_h)
                .flat_map(|y| (0..c.spec.real_w).map(move |x| vec![(0, y * c.spec.grid_w + x)]))
                .collect()
        } else {
            let mut units = Vec::with_capacity(self.geo.mcus_x * self.geo.mcus_y);
            for my in 0..self.geo.mcus_y {
                for mx in 0..self.geo.mcus_x {
                    let mut unit = Vec::new();
                    for (sc, (ci, _, _)) in scan.comps.iter().enumerate() {
                        let c = &self.comps[*ci];
                        for v in 0..c.spec.v {
                            for h in 0..c.spec.h {
                                unit.push((
                                    sc,
                                    (my * c.spec.v + v) * c.spec.grid_w + mx * c.spec.h + h,
                                ));
                            }
                        }
                    }
                    units.push(unit);
                }
            }
            units
        };
        let cond = self.conditioning;
        for (n, unit) in units.iter().enumerate() {
            if self.restart_interval > 0 && n > 0 && n % self.restart_interval == 0 {
                d.restart()?;
                stats = Stats::new();
                last_dc.iter_mut().for_each(|v| *v = 0);
                dc_context.iter_mut().for_each(|v| *v = 0);
            }
            for &(sc, block_index) in unit {
                let (ci, dc_t, ac_t) = scan.comps[sc];
                let block = &mut self.comps[ci].blocks[block_index];
                if scan.ss == 0 {
                    if scan.ah == 0 {
                        let diff = decode_dc_diff(
                            &mut d,
                            &mut stats.dc[dc_t],
                            &mut dc_context[sc],
                            cond.dc_l[dc_t],
                            cond.dc_u[dc_t],
                        )?;
                        // Kept to 16 bits, as coefficients are (a damaged file cannot overflow it).
                        last_dc[sc] = (last_dc[sc] + diff) as i16 as i32;
                        block[0] = (last_dc[sc] << scan.al) as i16;
                    } else if d.decode(&mut stats.fixed) != 0 {
                        block[0] |= 1 << scan.al;
                    }
                }
                // Sequential scans carry each block's AC coefficients after its DC; progressive
                // ones carry a band of them in scans of their own.
                let first_pass = match (self.geo.progressive, scan.ss, scan.ah) {
                    (false, _, _) => Some((1, 63, 0)),
                    (true, 1.., 0) => Some((scan.ss, scan.se, scan.al)),
                    _ => None,
                };
                if let Some(band) = first_pass {
                    decode_ac_first(
                        &mut d,
                        &mut stats.ac[ac_t],
                        &mut stats.fixed,
                        cond.ac_k[ac_t],
                        block,
                        band,
                    )?;
                } else if scan.ss > 0 {
                    decode_ac_refine(
                        &mut d,
                        &mut stats.ac[ac_t],
                        &mut stats.fixed,
                        block,
                        (scan.ss, scan.se, scan.al),
                    )?;
                }
            }
        }
        d.check_whole()
    }
}

/// Re-codes an arithmetic-coded JPEG (sequential or progressive, 8-bit) as a baseline Huffman
/// JPEG with the same coefficients. Fails, saying why, on anything else or a damaged file.
pub fn to_huffman(bytes: &[u8]) -> Res<Vec<u8>> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return fail("not a JPEG file");
    }
    let mut kept: Vec<&[u8]> = Vec::new(); // APPn, COM and DQT segments, markers included
    let mut frame: Option<Frame> = None;
    let mut conditioning = Conditioning {
        dc_l: [0; 4],
        dc_u: [1; 4],
        ac_k: [5; 4],
    };
    let mut restart_interval = 0;
    let mut dc_sent = [false; 4];
    let mut pos = 2;
    loop {
        let marker;
        (pos, marker) = jpeg::marker_at(bytes, pos)?;
        if marker == 0xD9 {
            break;
        }
        let (end, body) = jpeg::segment_at(bytes, pos)?;
        match marker {
            0xE0..=0xEF | 0xFE | 0xDB => kept.push(&bytes[pos..end]),
            0xC9 | 0xCA => {
                if frame.is_some() {
                    return fail("the JPEG has more than one frame");
                }
                frame = Some(parse_frame(body, marker == 0xCA)?);
            }
            0xC0..=0xC3 | 0xC5..=0xC7 | 0xCB | 0xCD..=0xCF => {
                return fail(format!(
                    "the frame type (SOF{}) is not sequential or progressive arithmetic coding",
                    marker - 0xC0
                ));
            }
            0xCC => {
                for pair in body.chunks_exact(2) {
                    let (class, table, value) = (pair[0] >> 4, (pair[0] & 0x0F) as usize, pair[1]);
                    if table > 3 {
                        return fail("a conditioning table number is above 3");
                    }
                    if class == 0 {
                        conditioning.dc_l[table] = value & 0x0F;
                        conditioning.dc_u[table] = value >> 4;
                    } else {
                        conditioning.ac_k[table] = value;
                    }
                }
            }
            0xDD => restart_interval = be16(body, 0)?,
            0xDA => {
                let f = frame
                    .as_mut()
                    .ok_or("a scan comes before the frame header")?;
                f.conditioning = conditioning;
                f.restart_interval = restart_interval;
                let scan = parse_scan(body, f)?;
                // The scan's data runs to the next marker that is not a restart.
                let mut stop = end;
                loop {
                    if stop + 1 >= bytes.len() {
                        return fail("the file ends inside the image data (cut short?)");
                    }
                    if bytes[stop] == 0xFF
                        && bytes[stop + 1] != 0
                        && !(0xD0..=0xD7).contains(&bytes[stop + 1])
                        && bytes[stop + 1] != 0xFF
                    {
                        break;
                    }
                    stop += 1;
                }
                f.decode_scan(&scan, &bytes[end..stop])?;
                for &(ci, _, _) in &scan.comps {
                    dc_sent[ci] |= scan.ss == 0;
                }
                pos = stop;
                continue;
            }
            _ => {} // DHT (unused here), DNL and others: nothing to keep
        }
        pos = end;
    }
    let frame = frame.ok_or("the JPEG has no frame header")?;
    // a frame whose scans never carried a component's DC coefficients has no picture there
    if let Some(c) = frame.comps.iter().zip(&dc_sent).find(|(_, sent)| !**sent) {
        return fail(format!(
            "component {} of the JPEG has no image data (cut short or damaged?)",
            c.0.spec.id
        ));
    }
    encode_baseline(&frame, &kept)
}

fn parse_frame(body: &[u8], progressive: bool) -> Res<Frame> {
    let (geo, specs) = jpeg::parse_frame(body, progressive)?;
    // 2^22 blocks of 128 bytes: half a gigabyte, a 150-megapixel photo.
    if specs.iter().map(ComponentSpec::blocks).sum::<usize>() > 1 << 22 {
        return fail("the image is too large to re-code");
    }
    let comps = specs
        .into_iter()
        .map(|spec| Component {
            blocks: vec![[0i16; 64]; spec.blocks()],
            spec,
        })
        .collect();
    Ok(Frame {
        geo,
        comps,
        restart_interval: 0,
        conditioning: Conditioning {
            dc_l: [0; 4],
            dc_u: [1; 4],
            ac_k: [5; 4],
        },
    })
}

fn parse_scan(body: &[u8], frame: &Frame) -> Res<Scan> {
    let specs: Vec<ComponentSpec> = frame.comps.iter().map(|c| c.spec).collect();
    jpeg::parse_scan(body, frame.geo.progressive, &specs)
}

/// An optimal JPEG Huffman table for these symbol counts (T.81 K.2): code lengths per length
/// (1-16) and symbols in code order.
fn optimal_table(counts: &[u64; 256]) -> Res<([u8; 16], Vec<u8>)> {
    let mut freq = [0u64; 257];
    freq[..256].copy_from_slice(counts);
    // One reserved code point, so no real code is all ones.
    freq[256] = 1;
    let mut size = [0usize; 257];
    let mut others = [-1i32; 257];
    loop {
        // The two least frequent (on ties, the higher symbol first).
        let mut c1: i32 = -1;
        let mut best = u64::MAX;
        for (i, f) in freq.iter().enumerate() {
            if *f != 0 && *f <= best {
                best = *f;
                c1 = i as i32;
            }
        }
        let mut c2: i32 = -1;
        best = u64::MAX;
        for (i, f) in freq.iter().enumerate() {
            if *f != 0 && *f <= best && i as i32 != c1 {
                best = *f;
                c2 = i as i32;
            }
        }
        if c2 < 0 {
            break;
        }
        let (mut a, mut b) = (c1 as usize, c2 as usize);
        freq[a] += freq[b];
        freq[b] = 0;
        size[a] += 1;
        while others[a] >= 0 {
            a = others[a] as usize;
            size[a] += 1;
        }
        others[a] = b as i32;
        size[b] += 1;
        while others[b] >= 0 {
            b = others[b] as usize;
            size[b] += 1;
        }
    }
    let mut bits = [0usize; 33];
    for s in size.iter().filter(|s| **s > 0) {
        if *s > 32 {
            return fail("the symbol statistics need codes longer than 32 bits");
        }
        bits[*s] += 1;
    }
    // Limit lengths to 16 (K.3's adjustment).
    for i in (17..=32).rev() {
        while bits[i] > 0 {
            let mut j = i - 2;
            while bits[j] == 0 {
                j -= 1;
            }
            bits[i] -= 2;
            bits[i - 1] += 1;
            bits[j + 1] += 2;
            bits[j] -= 1;
        }
    }
    // Drop the reserved code point (the longest code).
    let mut i = 16;
    while i > 0 && bits[i] == 0 {
        i -= 1;
    }
    bits[i] -= 1;
    let mut values = Vec::new();
    for len in 1..=32 {
        for (sym, s) in size.iter().enumerate().take(256) {
            if *s == len {
                values.push(sym as u8);
            }
        }
    }
    let mut out = [0u8; 16];
    for (o, b) in out.iter_mut().zip(&bits[1..=16]) {
        *o = *b as u8;
    }
    Ok((out, values))
}

/// Canonical codes for a table: `(code, length)` per symbol.
fn codes(bits: &[u8; 16], values: &[u8]) -> [(u32, u8); 256] {
    let mut out = [(0u32, 0u8); 256];
    let mut code = 0u32;
    let mut k = 0;
    for (len, n) in bits.iter().enumerate() {
        for _ in 0..*n {
            out[values[k] as usize] = (code, len as u8 + 1);
            code += 1;
            k += 1;
        }
        code <<= 1;
    }
    out
}

/// Bits into bytes, with 0xFF stuffing.
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl BitWriter {
    fn put(&mut self, bits: u32, len: u8) {
        if len == 0 {
            return;
        }
        self.acc = (self.acc << len) | (bits as u64 & ((1u64 << len) - 1));
        self.n += len as u32;
        while self.n >= 8 {
            self.n -= 8;
            let byte = (self.acc >> self.n) as u8;
            self.out.push(byte);
            if byte == 0xFF {
                self.out.push(0);
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        let pad = (8 - self.n % 8) % 8;
        self.put((1 << pad) - 1, pad as u8);
        self.out
    }
}

/// Bits needed for a magnitude (the JPEG "category").
fn category(v: i32) -> u8 {
    (32 - v.unsigned_abs().leading_zeros()) as u8
}

/// Visits every symbol of a baseline interleaved scan: (table class 0 DC / 1 AC, table, symbol,
/// extra bits, their count).
fn walk_symbols(frame: &Frame, mut emit: impl FnMut(usize, usize, u8, u32, u8)) -> Res<()> {
    let mut pred = vec![0i32; frame.comps.len()];
    let mut block = |ci: usize, b: &[i16; 64], pred: &mut [i32]| -> Res<()> {
        let t = usize::from(ci > 0);
        let diff = b[0] as i32 - pred[ci];
        pred[ci] = b[0] as i32;
        let s = category(diff);
        if s > 11 {
            return fail("a DC coefficient is outside what baseline JPEG can hold");
        }
        let extra = if diff < 0 { diff - 1 } else { diff };
        emit(0, t, s, extra as u32, s);
        let mut run = 0u8;
        for &z in &b[1..] {
            if z == 0 {
                run += 1;
                continue;
            }
            while run > 15 {
                emit(1, t, 0xF0, 0, 0);
                run -= 16;
            }
            let s = category(z as i32);
            if s > 10 {
                return fail("an AC coefficient is outside what baseline JPEG can hold");
            }
            let extra = if z < 0 { z as i32 - 1 } else { z as i32 };
            emit(1, t, (run << 4) | s, extra as u32, s);
            run = 0;
        }
        if run > 0 {
            emit(1, t, 0x00, 0, 0);
        }
        Ok(())
    };
    if frame.comps.len() == 1 {
        let c = &frame.comps[0];
        for y in 0..c.spec.real_h {
            for x in 0..c.spec.real_w {
                block(0, &c.blocks[y * c.spec.grid_w + x], &mut pred)?;
            }
        }
        return Ok(());
    }
    for my in 0..frame.geo.mcus_y {
        for mx in 0..frame.geo.mcus_x {
            for (ci, c) in frame.comps.iter().enumerate() {
                for v in 0..c.spec.v {
                    for h in 0..c.spec.h {
                        block(
                            ci,
                            &c.blocks[(my * c.spec.v + v) * c.spec.grid_w + mx * c.spec.h + h],
                            &mut pred,
                        )?;
                    }
                }
            }
        }
    }
    Ok(())
}

fn segment(out: &mut Vec<u8>, marker: u8, body: &[u8]) {
    out.extend_from_slice(&[0xFF, marker]);
    out.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(body);
}

/// Writes the frame as one baseline interleaved scan with optimal tables (one pair for the
/// first component, one for the rest).
fn encode_baseline(frame: &Frame, kept: &[&[u8]]) -> Res<Vec<u8>> {
    let mut counts = [[[0u64; 256]; 2]; 2];
    walk_symbols(frame, |class, t, sym, _, _| {
        counts[class][t][sym as usize] += 1
    })?;
    let tables = usize::from(frame.comps.len() > 1) + 1;
    let mut built = Vec::new();
    let mut out = vec![0xFF, 0xD8];
    for s in kept {
        out.extend_from_slice(s);
    }
    let mut sof = vec![8];
    sof.extend_from_slice(&(frame.geo.height as u16).to_be_bytes());
    sof.extend_from_slice(&(frame.geo.width as u16).to_be_bytes());
    sof.push(frame.comps.len() as u8);
    for c in &frame.comps {
        sof.extend_from_slice(&[
            c.spec.id,
            ((c.spec.h as u8) << 4) | c.spec.v as u8,
            c.spec.quant as u8,
        ]);
    }
    segment(&mut out, 0xC0, &sof);
    let mut dht = Vec::new();
    for (class, class_counts) in counts.iter().enumerate() {
        let mut per_table = Vec::new();
        for (t, count) in class_counts.iter().enumerate().take(tables) {
            let mut count = *count;
            if count.iter().all(|c| *c == 0) {
                count[0] = 1; // an empty table is not allowed
            }
            let (bits, values) = optimal_table(&count)?;
            dht.push(((class as u8) << 4) | t as u8);
            dht.extend_from_slice(&bits);
            dht.extend_from_slice(&values);
            per_table.push(codes(&bits, &values));
        }
        built.push(per_table);
    }
    segment(&mut out, 0xC4, &dht);
    let mut sos = vec![frame.comps.len() as u8];
    for (ci, c) in frame.comps.iter().enumerate() {
        let t = u8::from(ci > 0);
        sos.extend_from_slice(&[c.spec.id, (t << 4) | t]);
    }
    sos.extend_from_slice(&[0, 63, 0]);
    segment(&mut out, 0xDA, &sos);
    let mut w = BitWriter { out, acc: 0, n: 0 };
    walk_symbols(frame, |class, t, sym, extra, extra_len| {
        let (code, len) = built[class][t][sym as usize];
        w.put(code, len);
        w.put(extra, extra_len);
    })?;
    let mut out = w.finish();
    out.extend_from_slice(&[0xFF, 0xD9]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optimal_tables_give_a_prefix_code_within_16_bits() {
        let mut counts = [0u64; 256];
        for (i, c) in counts.iter_mut().enumerate() {
            *c = if i % 3 == 0 { 1 } else { (i as u64).pow(3) };
        }
        let (bits, values) = optimal_table(&counts).unwrap();
        assert_eq!(bits.iter().map(|b| *b as usize).sum::<usize>(), 256);
        assert_eq!(values.len(), 256);
        let table = codes(&bits, &values);
        // Kraft: the lengths fit, with room left (no all-ones code).
        let kraft: f64 = table.iter().map(|(_, l)| 2f64.powi(-(*l as i32))).sum();
        assert!(kraft < 1.0, "{kraft}");
        assert!(
            table
                .iter()
                .all(|(code, len)| *len >= 1 && *len <= 16 && *code < (1 << len) - 1)
        );
    }

    #[test]
    fn bits_are_stuffed_and_padded_with_ones() {
        let mut w = BitWriter {
            out: Vec::new(),
            acc: 0,
            n: 0,
        };
        w.put(0xFF, 8);
        w.put(0b101, 3);
        assert_eq!(w.finish(), [0xFF, 0x00, 0b1011_1111]);
    }

    fn pixels(jpeg: &[u8]) -> Vec<u8> {
        jpeg_decoder::Decoder::new(jpeg).decode().unwrap()
    }

    /// Sequential 4:2:0 with restarts and DAC conditioning, progressive with refinement scans,
    /// and grayscale, made by `cjpeg -arithmetic`; the references are `jpegtran -optimize`'s
    /// Huffman re-coding of the same files. Same coefficients, so the very same pixels.
    #[test]
    fn arithmetic_files_recode_to_the_same_pixels_as_jpegtran() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
        for name in ["arith-420", "arith-progressive", "arith-gray"] {
            let original = std::fs::read(format!("{dir}{name}.jpg")).unwrap();
            let reference = std::fs::read(format!("{dir}{name}.huffman.jpg")).unwrap();
            let recoded = to_huffman(&original).unwrap_or_else(|e| panic!("{name}: {e}"));
            let info = crate::tools::jpeg::read_info(&recoded).unwrap();
            assert!(info.pdf_can_embed() && info.frame == 0, "{name}: baseline");
            assert_eq!(pixels(&recoded), pixels(&reference), "{name}");
            // A cut file is refused, not half decoded.
            let e = to_huffman(&original[..original.len() * 2 / 3]).unwrap_err();
            assert!(e.contains("cut short"), "{name}: {e}");
        }
    }

    /// Damaged files give an error or a re-coded file, never a panic (tests run with overflow
    /// checks on): four hundred single-byte corruptions of each fixture.
    /// Arithmetic decoding reads zeros past the data, so a cut file decodes "fine" (grey from
    /// the cut on): refused, like a frame whose scans never came.
    #[test]
    fn cut_files_are_refused() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
        for name in ["arith-420", "arith-progressive", "arith-gray"] {
            let whole = std::fs::read(format!("{dir}{name}.jpg")).unwrap();
            assert!(to_huffman(&whole).is_ok(), "{name}");
            for cut in [whole.len() / 2, whole.len() * 9 / 10] {
                let mut half = whole[..cut].to_vec();
                half.extend_from_slice(&[0xFF, 0xD9]);
                let e = to_huffman(&half)
                    .err()
                    .unwrap_or_else(|| panic!("{name} cut at {cut}"));
                assert!(e.contains("cut short"), "{name} at {cut}: {e}");
            }
            let sos = whole.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
            let mut no_scan = whole[..sos].to_vec();
            no_scan.extend_from_slice(&[0xFF, 0xD9]);
            let e = to_huffman(&no_scan).unwrap_err();
            assert!(e.contains("no image data"), "{name}: {e}");
        }
    }

    #[test]
    fn damaged_files_never_panic() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
        let mut state = 0x2545_f491_u32;
        for name in ["arith-420", "arith-progressive", "arith-gray"] {
            let original = std::fs::read(format!("{dir}{name}.jpg")).unwrap();
            for _ in 0..400 {
                let mut damaged = original.clone();
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let at = (state >> 8) as usize % damaged.len();
                damaged[at] ^= (state as u8) | 1;
                let _ = to_huffman(&damaged);
            }
        }
    }

    #[test]
    fn other_files_are_refused_with_reasons() {
        assert!(to_huffman(b"nope").unwrap_err().contains("not a JPEG"));
        let baseline = [
            0xFF, 0xD8, 0xFF, 0xC0, 0, 11, 8, 0, 1, 0, 1, 1, 1, 0x11, 0, 0xFF, 0xD9,
        ];
        assert!(to_huffman(&baseline).unwrap_err().contains("SOF0"));
        assert!(
            to_huffman(&[0xFF, 0xD8, 0xFF])
                .unwrap_err()
                .contains("cut short")
        );
    }
}

//! Reading a JPEG's header without decoding it: what `build_image_pdf` needs to embed the bytes
//! as they are (a `DCTDecode` stream) or to know it must decode them instead.
//!
//! It walks the marker segments up to the frame header and reports the pixel size, the number
//! of components (1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK), the sample precision, whether the frame is
//! one PDF readers can show (baseline, extended or progressive Huffman; not lossless,
//! hierarchical or arithmetic-coded), the Adobe APP14 transform (CMYK JPEGs written by Adobe
//! software are stored inverted), and the EXIF orientation (1-8; 0 and anything else invalid
//! means 1, as cameras that write 0 intend).
//!
//! It also reads the frame and scan headers into the block layout that the two entropy
//! decoders (`pdf::huffman_jpeg`, `pdf::arithmetic_jpeg`) share.

/// What a JPEG's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegInfo {
    /// Pixels across.
    pub width: u16,
    /// Pixels down.
    pub height: u16,
    /// Colour components: 1, 3 or 4.
    pub components: u8,
    /// Bits per sample (8 for nearly all files; 12 exists).
    pub precision: u8,
    /// The frame type (the SOF marker's low nibble: 0 baseline, 1 extended, 2 progressive...).
    pub frame: u8,
    /// The Adobe APP14 transform flag, when the segment is present.
    pub adobe_transform: Option<u8>,
    /// EXIF orientation, 1-8.
    pub orientation: u8,
}

impl JpegInfo {
    /// Whether a PDF `DCTDecode` filter can show it as it is: Huffman-coded baseline, extended or
    /// progressive frames at 8 bits, with 1, 3 or 4 components.
    pub fn pdf_can_embed(&self) -> bool {
        matches!(self.frame, 0..=2) && self.precision == 8 && matches!(self.components, 1 | 3 | 4)
    }

    /// Whether a 4-component image is stored inverted (Adobe's convention): a PDF needs
    /// `/Decode [1 0 1 0 1 0 1 0]` to show it right.
    pub fn inverted_cmyk(&self) -> bool {
        self.components == 4 && self.adobe_transform.is_some()
    }
}

/// Why a header could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JpegError(pub String);

impl std::fmt::Display for JpegError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(m: &str) -> Result<T, JpegError> {
    Err(JpegError(m.to_string()))
}

/// Reads the header of a JPEG file.
pub fn read_info(bytes: &[u8]) -> Result<JpegInfo, JpegError> {
    if bytes.len() < 4 || bytes[0] != 0xFF || bytes[1] != 0xD8 {
        return err("not a JPEG file (no start-of-image marker)");
    }
    let mut i = 2;
    let mut adobe_transform = None;
    let mut orientation = 1u8;
    let mut exif_seen = false;
    loop {
        // Skip fill bytes before a marker.
        while i < bytes.len() && bytes[i] == 0xFF && bytes.get(i + 1) == Some(&0xFF) {
            i += 1;
        }
        if i + 4 > bytes.len() || bytes[i] != 0xFF {
            return err("the file ends before the frame header");
        }
        let marker = bytes[i + 1];
        let len = u16::from_be_bytes([bytes[i + 2], bytes[i + 3]]) as usize;
        if len < 2 || i + 2 + len > bytes.len() {
            return err("a segment runs past the end of the file");
        }
        let seg = &bytes[i + 4..i + 2 + len];
        match marker {
            // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC).
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                if seg.len() < 6 {
                    return err("the frame header is too short");
                }
                let precision = seg[0];
                let height = u16::from_be_bytes([seg[1], seg[2]]);
                let width = u16::from_be_bytes([seg[3], seg[4]]);
                let components = seg[5];
                if width == 0 || height == 0 {
                    return err("the frame header gives no pixel size");
                }
                return Ok(JpegInfo {
                    width,
                    height,
                    components,
                    precision,
                    frame: marker & 0x0F,
                    adobe_transform,
                    orientation,
                });
            }
            // the first EXIF segment counts, as in libexif and Pillow (a second one is usually
            // an editor's leftover)
            0xE1 if seg.starts_with(b"Exif\0\0") && !exif_seen => {
                exif_seen = true;
                orientation = exif_orientation(&seg[6..]).unwrap_or(1);
            }
            0xEE if seg.starts_with(b"Adobe") && seg.len() >= 12 => {
                adobe_transform = Some(seg[11]);
            }
            0xDA | 0xD9 => return err("the image data starts before any frame header"),
            _ => {}
        }
        i += 2 + len;
    }
}

/// The orientation tag (0x0112) of IFD0 in a TIFF-structured EXIF block; `None` when absent.
/// Values outside 1-8 (some cameras write 0) mean "as stored": 1.
pub fn exif_orientation(tiff: &[u8]) -> Option<u8> {
    if tiff.len() < 8 {
        return None;
    }
    let le = match &tiff[..2] {
        b"II" => true,
        b"MM" => false,
        _ => return None,
    };
    let u16_at = |o: usize| -> Option<u16> {
        let b = tiff.get(o..o + 2)?;
        Some(if le {
            u16::from_le_bytes([b[0], b[1]])
        } else {
            u16::from_be_bytes([b[0], b[1]])
        })
    };
    let u32_at = |o: usize| -> Option<u32> {
        let b = tiff.get(o..o + 4)?;
        Some(if le {
            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
        } else {
            u32::from_be_bytes([b[0], b[1], b[2], b[3]])
        })
    };
    if u16_at(2)? != 42 {
        return None;
    }
    let ifd = u32_at(4)? as usize;
    let count = u16_at(ifd)? as usize;
    for n in 0..count.min(500) {
        let entry = ifd + 2 + n * 12;
        if u16_at(entry)? == 0x0112 {
            // SHORT as the standard says; some writers store a LONG
            let value = match u16_at(entry + 2)? {
                4 => u32_at(entry + 8)?,
                _ => u32::from(u16_at(entry + 8)?),
            };
            return Some(if (1..=8).contains(&value) {
                value as u8
            } else {
                1
            });
        }
    }
    None
}

/// How a frame's blocks are laid out (T.81 A.2, B.2.2): what decoding its scans needs.
#[derive(Debug, Clone, Copy)]
pub struct FrameGeometry {
    /// A progressive frame (SOF2, SOF10): scans carry bands of coefficients.
    pub progressive: bool,
    /// Pixels across.
    pub width: usize,
    /// Pixels down.
    pub height: usize,
    /// The largest horizontal and vertical sampling factors.
    pub hmax: usize,
    /// See `hmax`.
    pub vmax: usize,
    /// Minimum coded units across and down in an interleaved scan.
    pub mcus_x: usize,
    /// See `mcus_x`.
    pub mcus_y: usize,
}

/// One frame component and where its blocks lie.
#[derive(Debug, Clone, Copy)]
pub struct ComponentSpec {
    /// Its id, as scans name it.
    pub id: u8,
    /// Horizontal sampling factor (1-4).
    pub h: usize,
    /// Vertical sampling factor (1-4).
    pub v: usize,
    /// Its quantisation table (0-3).
    pub quant: usize,
    /// Blocks across and down in the MCU-padded grid.
    pub grid_w: usize,
    /// See `grid_w`.
    pub grid_h: usize,
    /// Blocks across and down that hold samples (what a scan of it alone codes).
    pub real_w: usize,
    /// See `real_w`.
    pub real_h: usize,
}

impl ComponentSpec {
    /// Blocks in the padded grid.
    pub fn blocks(&self) -> usize {
        self.grid_w * self.grid_h
    }
}

/// A scan header (T.81 B.2.3).
#[derive(Debug, Clone)]
pub struct ScanHeader {
    /// Per scan component: its index in the frame, its DC and AC table numbers.
    pub comps: Vec<(usize, usize, usize)>,
    /// Spectral selection start and end (zigzag indices).
    pub ss: usize,
    /// See `ss`.
    pub se: usize,
    /// Successive approximation: the bit position before (`ah`) and in (`al`) this scan.
    pub ah: u8,
    /// See `ah`.
    pub al: u8,
}

/// A big-endian 16-bit number at `at`, or an error saying the file is cut short.
pub fn be16(b: &[u8], at: usize) -> Result<usize, String> {
    match b.get(at..at + 2) {
        Some(s) => Ok(u16::from_be_bytes([s[0], s[1]]) as usize),
        None => Err("the file ends inside a marker segment (cut short?)".to_string()),
    }
}

/// The marker at `pos` (after any fill bytes): where it starts and its code. Fails when the
/// file ends first or something else is there.
pub fn marker_at(bytes: &[u8], mut pos: usize) -> Result<(usize, u8), String> {
    while bytes.get(pos) == Some(&0xFF) && bytes.get(pos + 1) == Some(&0xFF) {
        pos += 1;
    }
    if pos + 1 >= bytes.len() {
        return Err("the file ends before its end-of-image marker (cut short?)".to_string());
    }
    if bytes[pos] != 0xFF {
        return Err(format!("a marker was expected at byte {pos} (damaged?)"));
    }
    Ok((pos, bytes[pos + 1]))
}

/// The segment of the marker at `pos`: where it ends and its body (after the length).
pub fn segment_at(bytes: &[u8], pos: usize) -> Result<(usize, &[u8]), String> {
    let len = be16(bytes, pos + 2)?;
    let end = pos + 2 + len;
    if len < 2 || end > bytes.len() {
        return Err("a marker segment runs past the end of the file (cut short?)".to_string());
    }
    Ok((end, &bytes[pos + 4..end]))
}

/// Reads an 8-bit frame header's body (after the length).
pub fn parse_frame(
    body: &[u8],
    progressive: bool,
) -> Result<(FrameGeometry, Vec<ComponentSpec>), String> {
    let bad = |m: &str| Err(m.to_string());
    if body.len() < 6 {
        return bad("the frame header is too short");
    }
    if body[0] != 8 {
        return Err(format!(
            "{}-bit samples cannot be shown by PDF readers",
            body[0]
        ));
    }
    let height = be16(body, 1)?;
    let width = be16(body, 3)?;
    let n = body[5] as usize;
    if width == 0 || height == 0 || !matches!(n, 1 | 3 | 4) || body.len() < 6 + 3 * n {
        return bad("the frame header is invalid");
    }
    let specs: Vec<(u8, usize, usize, usize)> = (0..n)
        .map(|i| {
            let s = &body[6 + 3 * i..9 + 3 * i];
            let (h, v) = ((s[1] >> 4) as usize, (s[1] & 0x0F) as usize);
            (s[0], h, v, s[2] as usize)
        })
        .collect();
    if specs
        .iter()
        .any(|(_, h, v, q)| !(1..=4).contains(h) || !(1..=4).contains(v) || *q > 3)
    {
        return bad("a component has invalid sampling factors or quantisation table");
    }
    let hmax = specs.iter().map(|s| s.1).max().unwrap_or(1);
    let vmax = specs.iter().map(|s| s.2).max().unwrap_or(1);
    let (mcus_x, mcus_y) = (width.div_ceil(8 * hmax), height.div_ceil(8 * vmax));
    let comps = specs
        .into_iter()
        .map(|(id, h, v, quant)| ComponentSpec {
            id,
            h,
            v,
            quant,
            grid_w: mcus_x * h,
            grid_h: mcus_y * v,
            real_w: (width * h).div_ceil(hmax).div_ceil(8),
            real_h: (height * v).div_ceil(vmax).div_ceil(8),
        })
        .collect();
    let geometry = FrameGeometry {
        progressive,
        width,
        height,
        hmax,
        vmax,
        mcus_x,
        mcus_y,
    };
    Ok((geometry, comps))
}

/// Reads a scan header's body against its frame's components.
pub fn parse_scan(
    body: &[u8],
    progressive: bool,
    frame: &[ComponentSpec],
) -> Result<ScanHeader, String> {
    let bad = |m: &str| Err(m.to_string());
    let n = *body.first().ok_or("the scan header is empty")? as usize;
    if n == 0 || n > 4 || body.len() < 1 + 2 * n + 3 {
        return bad("the scan header is invalid");
    }
    let mut comps: Vec<(usize, usize, usize)> = Vec::with_capacity(n);
    for i in 0..n {
        let (id, tables) = (body[1 + 2 * i], body[2 + 2 * i]);
        let Some(ci) = frame.iter().position(|c| c.id == id) else {
            return bad("a scan names a component the frame does not have");
        };
        if comps.iter().any(|c| c.0 == ci) {
            return bad("a scan names a component twice");
        }
        let (dc, ac) = ((tables >> 4) as usize, (tables & 0x0F) as usize);
        if dc > 3 || ac > 3 {
            return bad("a scan names a table above 3");
        }
        comps.push((ci, dc, ac));
    }
    let rest = &body[1 + 2 * n..];
    let (ss, se, ah, al) = (
        rest[0] as usize,
        rest[1] as usize,
        rest[2] >> 4,
        rest[2] & 0x0F,
    );
    let valid = if progressive {
        se <= 63 && ss <= se && (ss > 0 || se == 0) && (ss == 0 || n == 1) && al < 14 && ah < 14
    } else {
        ss == 0 && se == 63 && ah == 0 && al == 0
    };
    if !valid {
        return bad("the scan's spectral selection or approximation is invalid");
    }
    let blocks: usize = comps.iter().map(|c| frame[c.0].h * frame[c.0].v).sum();
    if n > 1 && blocks > 10 {
        return bad("a scan's blocks per unit exceed 10");
    }
    Ok(ScanHeader {
        comps,
        ss,
        se,
        ah,
        al,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jpeg(w: u32, h: u32) -> Vec<u8> {
        let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb([x as u8, y as u8, 128]));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
        out.into_inner()
    }

    /// An APP1 EXIF segment holding one orientation entry.
    fn exif_segment(orientation: u16, little_endian: bool) -> Vec<u8> {
        let mut tiff = Vec::new();
        let w16 = |v: u16| {
            if little_endian {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            }
        };
        let w32 = |v: u32| {
            if little_endian {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            }
        };
        tiff.extend_from_slice(if little_endian { b"II" } else { b"MM" });
        tiff.extend_from_slice(&w16(42));
        tiff.extend_from_slice(&w32(8));
        tiff.extend_from_slice(&w16(1));
        tiff.extend_from_slice(&w16(0x0112));
        tiff.extend_from_slice(&w16(3));
        tiff.extend_from_slice(&w32(1));
        tiff.extend_from_slice(&w16(orientation));
        tiff.extend_from_slice(&[0, 0]);
        tiff.extend_from_slice(&w32(0));
        let mut seg = vec![0xFF, 0xE1];
        let len = (2 + 6 + tiff.len()) as u16;
        seg.extend_from_slice(&len.to_be_bytes());
        seg.extend_from_slice(b"Exif\0\0");
        seg.extend_from_slice(&tiff);
        seg
    }

    fn with_segment(jpeg: &[u8], seg: &[u8]) -> Vec<u8> {
        let mut out = jpeg[..2].to_vec();
        out.extend_from_slice(seg);
        out.extend_from_slice(&jpeg[2..]);
        out
    }

    #[test]
    fn reads_size_components_and_frame() {
        let info = read_info(&jpeg(64, 48)).unwrap();
        assert_eq!(
            (
                info.width,
                info.height,
                info.components,
                info.precision,
                info.frame
            ),
            (64, 48, 3, 8, 0)
        );
        assert_eq!(info.orientation, 1);
        assert!(info.pdf_can_embed());
        assert!(!info.inverted_cmyk());
    }

    #[test]
    fn reads_exif_orientation_in_both_byte_orders_and_treats_invalid_as_upright() {
        let base = jpeg(8, 8);
        for o in 1..=8u16 {
            for le in [true, false] {
                let info = read_info(&with_segment(&base, &exif_segment(o, le))).unwrap();
                assert_eq!(
                    info.orientation, o as u8,
                    "orientation {o}, little endian {le}"
                );
            }
        }
        for bad in [0u16, 9, 255] {
            assert_eq!(
                read_info(&with_segment(&base, &exif_segment(bad, true)))
                    .unwrap()
                    .orientation,
                1
            );
        }
    }

    /// An orientation stored as a LONG is read; of two EXIF segments the first counts.
    #[test]
    fn a_long_orientation_is_read_and_the_first_exif_segment_counts() {
        let base = jpeg(8, 8);
        for le in [true, false] {
            let mut seg = exif_segment(6, le);
            // type SHORT (3) at entry + 2 → LONG (4), the value as 4 bytes
            let entry = 4 + 6 + 8 + 2;
            seg[entry + 2..entry + 4].copy_from_slice(&if le {
                4u16.to_le_bytes()
            } else {
                4u16.to_be_bytes()
            });
            seg[entry + 8..entry + 12].copy_from_slice(&if le {
                6u32.to_le_bytes()
            } else {
                6u32.to_be_bytes()
            });
            assert_eq!(
                read_info(&with_segment(&base, &seg)).unwrap().orientation,
                6,
                "le {le}"
            );
        }
        let both = with_segment(
            &with_segment(&base, &exif_segment(8, true)),
            &exif_segment(3, true),
        );
        assert_eq!(
            read_info(&both).unwrap().orientation,
            3,
            "the first segment in the file"
        );
    }

    #[test]
    fn adobe_cmyk_and_frames_pdf_cannot_show() {
        let base = jpeg(8, 8);
        // An Adobe APP14 segment, and the frame header patched to 4 components.
        let mut adobe = vec![0xFF, 0xEE, 0, 14];
        adobe.extend_from_slice(b"Adobe");
        adobe.extend_from_slice(&[0, 100, 0, 0, 0, 0, 0]);
        let mut bytes = with_segment(&base, &adobe);
        let sof = bytes.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        bytes[sof + 9] = 4;
        let info = read_info(&bytes).unwrap();
        assert_eq!(info.adobe_transform, Some(0));
        assert!(info.inverted_cmyk());
        // hierarchical (SOF5), arithmetic (SOF9) and lossless (SOF3) frames must be decoded
        for marker in [0xC3u8, 0xC5, 0xC9, 0xCA] {
            let mut b = base.clone();
            let sof = b.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
            b[sof + 1] = marker;
            assert!(!read_info(&b).unwrap().pdf_can_embed(), "marker {marker:X}");
        }
        assert!(read_info(b"not a jpeg").is_err());
        assert!(read_info(&base[..20]).is_err());
    }
}

//! An image made ready for pages once, when it is imported, so a build only copies bytes.
//!
//! Importing must check the file anyway (a damaged image is refused then, not at build time).
//! A JPEG a PDF embeds as it is gets its entropy-coded data checked to the last block and its
//! thumbnail from the blocks' DC picture, no pixel decoded (see [`super::huffman_jpeg`]);
//! anything else is decoded once, which yields the preview thumbnail and the PDF image planes — colour and alpha, PNG-filtered and compressed
//! (see [`super::flate`]) — except that an opaque gray or RGB PNG keeps its own compressed rows,
//! which a PDF reads as they are (see [`png_rows`]). They are kept beside the asset (`N.prepared`, `N.thumb`) and checked
//! against the asset's SHA-256 when used; a missing or stale one is simply made again from the
//! asset, so these files are a cache, never the only copy of anything.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::flate::{self, Plane};
use crate::error::Result;
use crate::store;
use crate::tools::jpeg;

/// Bumped when the prepared file's layout or encoding changes; older files are made again.
pub const PREPARED_FORMAT: u32 = 1;

/// Longest edge of a preview thumbnail, in pixels.
pub const THUMB_EDGE: u32 = 240;

/// The description that starts a prepared file (one JSON line; the data follows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedHeader {
    /// [`PREPARED_FORMAT`] when written.
    pub format: u32,
    /// The SHA-256 of the asset it was made from.
    pub source_sha256: String,
    /// Pixels across, as stored.
    pub width: u32,
    /// Pixels down, as stored.
    pub height: u32,
    /// EXIF orientation, 1-8.
    pub orientation: u8,
    /// The colour plane (its bytes come first).
    pub color: Plane,
    /// The alpha plane, when the image has transparency (its bytes follow the colour's).
    pub mask: Option<Plane>,
    /// Set when the colour bytes are not Flate data but a baseline JPEG re-coded from an
    /// arithmetic-coded one, embedded with `DCTDecode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dct: Option<Dct>,
}

/// What a `DCTDecode` image needs beyond its plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dct {
    /// CMYK stored inverted (Adobe's way): the PDF needs the inverting `Decode` array.
    pub inverted_cmyk: bool,
}

/// Prepared planes in memory: the header and the compressed colour and mask bytes.
pub struct Prepared {
    /// What the bytes are.
    pub header: PreparedHeader,
    /// The header as the file's first line (JSON and a newline).
    pub header_line: Vec<u8>,
    /// The colour plane, compressed.
    pub color: Vec<u8>,
    /// The mask plane, compressed; empty when there is none.
    pub mask: Vec<u8>,
}

impl Prepared {
    fn new(header: PreparedHeader, color: Vec<u8>, mask: Vec<u8>) -> Prepared {
        // Plain strings and numbers: serialising them cannot fail.
        let mut header_line = serde_json::to_vec(&header).expect("a prepared header serialises");
        header_line.push(b'\n');
        Prepared {
            header,
            header_line,
            color,
            mask,
        }
    }
}

/// What one decode of an image file gives.
pub struct Analysis {
    /// Pixels across, as stored.
    pub width: u32,
    /// Pixels down, as stored.
    pub height: u32,
    /// EXIF orientation, 1-8 (invalid values mean 1).
    pub orientation: u8,
    /// A small JPEG (opaque images) or PNG (with alpha), already turned upright.
    pub thumbnail: Vec<u8>,
    /// The PDF planes, unless the file is a JPEG a PDF embeds as it is.
    pub prepared: Option<Prepared>,
}

/// Where an asset's prepared planes are kept.
pub fn prepared_path(assets_dir: &Path, asset_id: u64) -> PathBuf {
    assets_dir.join(format!("{asset_id}{PREPARED_SUFFIX}"))
}

/// The file-name endings of what an analysis stores beside an asset `N`: `N.prepared`, `N.thumb`.
const PREPARED_SUFFIX: &str = ".prepared";
const THUMB_SUFFIX: &str = ".thumb";

/// Where an asset's thumbnail is kept.
pub fn thumb_path(assets_dir: &Path, asset_id: u64) -> PathBuf {
    assets_dir.join(format!("{asset_id}{THUMB_SUFFIX}"))
}

/// Whether a PDF embeds this file byte for byte (a JPEG its `DCTDecode` filter can show).
pub fn passthrough_jpeg(bytes: &[u8]) -> Option<jpeg::JpegInfo> {
    jpeg::read_info(bytes).ok().filter(|i| i.pdf_can_embed())
}

/// How large an image may be, checked from its header before anything is decoded: a small file
/// can claim a huge picture (a "decompression bomb": a 3.5 MB PNG of 30000×30000 pixels decodes
/// to 3.6 GB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageBudget {
    /// Most pixels (width × height).
    pub max_pixels: u64,
    /// Most bytes the decoded picture may take.
    pub max_bytes: u64,
}

impl Default for ImageBudget {
    fn default() -> Self {
        ImageBudget::from_limits(&crate::config::Limits::default())
    }
}

impl ImageBudget {
    /// The budget the config's `limits.image_megapixels` and `limits.image_decode_mb` set.
    pub fn from_limits(limits: &crate::config::Limits) -> ImageBudget {
        ImageBudget {
            max_pixels: u64::from(limits.image_megapixels.max(1)) * 1_000_000,
            max_bytes: u64::from(limits.image_decode_mb.max(1)) << 20,
        }
    }

    /// Refuses a picture of `width` × `height` taking `bytes` decoded, naming both limits.
    fn check(&self, width: u64, height: u64, bytes: u64) -> std::result::Result<(), String> {
        let pixels = width.saturating_mul(height);
        if pixels > self.max_pixels {
            return Err(format!(
                "it is {width}×{height} pixels ({:.1} megapixels); lmcp takes at most {} \
                 megapixels (limits.image_megapixels)",
                pixels as f64 / 1e6,
                self.max_pixels / 1_000_000
            ));
        }
        if bytes > self.max_bytes {
            return Err(format!(
                "it would take {} MiB decoded ({width}×{height}); the limit is {} MiB \
                 (limits.image_decode_mb)",
                bytes >> 20,
                self.max_bytes >> 20
            ));
        }
        Ok(())
    }
}

/// Decodes an image file whole, within `budget`; the error says why it does not decode. `stop`
/// is asked now and then during the longest work (a JPEG's check) and ends it when it says so.
pub fn analyse(
    bytes: &[u8],
    source_sha256: &str,
    budget: ImageBudget,
    stop: &(dyn Fn() -> bool + Sync),
) -> std::result::Result<Analysis, String> {
    use image::ImageDecoder;
    // A JPEG's header, read once for every JPEG path below.
    let header = jpeg::read_info(bytes).ok();
    if let Some(info) = header {
        let sample = if info.precision > 8 { 2 } else { 1 };
        let (w, h) = (u64::from(info.width), u64::from(info.height));
        let channels = u64::from(info.components.max(3));
        budget.check(w, h, w * h * channels * sample)?;
    } else if bytes.starts_with(&[0xFF, 0xD8]) {
        // a JPEG lmcp's own header reader does not take (lossless, say): jpeg-decoder's
        let mut d = jpeg_decoder::Decoder::new(std::io::Cursor::new(bytes));
        d.read_info().map_err(|e| e.to_string())?;
        let info = d.info().ok_or("the JPEG has no frame header")?;
        let (w, h) = (u64::from(info.width), u64::from(info.height));
        budget.check(w, h, w * h * 4 * 2)?;
    }
    if let Some(info) = header.filter(|i| i.pdf_can_embed()) {
        // Embedded as it is, so it is only checked to its last block (a cut file with an end
        // marker appended is refused) and a thumbnail made: from the blocks' DC picture (1/8
        // scale, no pixel decoded), or for a small image whose DC picture is smaller than a
        // thumbnail, from a decode at the scale one needs.
        let checked = super::huffman_jpeg::check_until(bytes, stop)?;
        let dc = &checked.dc_image;
        let source = if dc.width().max(dc.height()) >= THUMB_EDGE {
            checked.dc_image
        } else {
            decode_jpeg(bytes, 8, true)?.image
        };
        return Ok(Analysis {
            width: info.width as u32,
            height: info.height as u32,
            orientation: info.orientation,
            thumbnail: thumbnail(&source, info.orientation)?,
            prepared: None,
        });
    }
    if let Some(info) = header.filter(|i| matches!(i.frame, 9 | 10)) {
        // Arithmetic coding: re-coded with Huffman codes, the same coefficients, so it is
        // embedded as a JPEG after all.
        let recoded = super::arithmetic_jpeg::to_huffman(bytes)?;
        let small = decode_jpeg(&recoded, 8, true)?;
        let (width, height) = (info.width as u32, info.height as u32);
        let plane = Plane {
            colors: info.components,
            bits: 8,
            width,
            height,
            len: recoded.len() as u64,
        };
        return Ok(Analysis {
            width,
            height,
            orientation: info.orientation,
            thumbnail: thumbnail(&small.image, info.orientation)?,
            prepared: Some(Prepared::new(
                PreparedHeader {
                    format: PREPARED_FORMAT,
                    source_sha256: source_sha256.to_string(),
                    width,
                    height,
                    orientation: info.orientation,
                    color: plane,
                    mask: None,
                    dct: Some(Dct {
                        inverted_cmyk: info.inverted_cmyk(),
                    }),
                },
                recoded,
                Vec::new(),
            )),
        });
    }
    if bytes.starts_with(&[0xFF, 0xD8]) {
        // A JPEG a PDF cannot show as it is (lossless, say): decoded and stored losslessly,
        // after a check that its data is whole (the decoder pads a cut file).
        if header.is_some_and(|i| i.frame == 3) {
            super::huffman_jpeg::check_lossless(bytes, stop)?;
        }
        let decoded = decode_jpeg(bytes, header.map_or(8, |i| i.precision), false)?;
        let orientation = header.map_or(1, |i| i.orientation);
        let (w, h) = (decoded.image.width(), decoded.image.height());
        let thumbnail = thumbnail(&decoded.image, orientation)?;
        let prepared = match decoded.cmyk {
            Some(raw) => planes_of(w, h, 4, 8, false, raw, orientation, source_sha256),
            None => planes(decoded.image, orientation, source_sha256),
        };
        return Ok(Analysis {
            width: w,
            height: h,
            orientation,
            thumbnail,
            prepared: Some(prepared),
        });
    }
    // A PNG's ICC profile is never used (pages are DeviceRGB) and its compressed chunk can
    // inflate to gigabytes whatever the picture's size: it is left out before decoding.
    let stripped = without_png_iccp(bytes);
    let bytes = stripped.as_deref().unwrap_or(bytes);
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(budget.max_bytes);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(|e| e.to_string())?;
    let (w, h) = decoder.dimensions();
    budget.check(u64::from(w), u64::from(h), decoder.total_bytes())?;
    let orientation = decoder.orientation().map(orientation_of).unwrap_or(1);
    let img = image::DynamicImage::from_decoder(decoder).map_err(|e| e.to_string())?;
    let (width, height) = (img.width(), img.height());
    let thumbnail = thumbnail(&img, orientation)?;
    let prepared = match png_rows(bytes, &img) {
        Some(rows) => flate_prepared((width, height), orientation, source_sha256, rows, None),
        None => planes(img, orientation, source_sha256),
    };
    Ok(Analysis {
        width,
        height,
        orientation,
        thumbnail,
        prepared: Some(prepared),
    })
}

/// An opaque PNG's own compressed rows, when a PDF can read them as they are: what `/FlateDecode`
/// with `/Predictor 15` reads is exactly a PNG's IDAT data (zlib, each row led by its filter
/// type), for gray or RGB at 8 or 16 bits, not interlaced and with no transparent colour. Such a
/// page is then never larger than the file's own data — nor than img2pdf's, which embeds it the
/// same way — and costs no filtering or compressing. `decoded` is the image the file decoded to
/// (so it is whole); the data is also inflated here, strictly (its checksum, and exactly the
/// rows the header declares), so what a PDF reader inflates is what was checked. `None` means
/// encode the planes anew.
fn png_rows(bytes: &[u8], decoded: &image::DynamicImage) -> Option<(Plane, Vec<u8>)> {
    use image::DynamicImage as D;
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    let (colors, bits) = match decoded {
        D::ImageLuma8(_) => (1u8, 8u8),
        D::ImageLuma16(_) => (1, 16),
        D::ImageRgb8(_) => (3, 8),
        D::ImageRgb16(_) => (3, 16),
        _ => return None,
    };
    let rest = bytes.strip_prefix(SIGNATURE)?;
    let mut chunks = Vec::new();
    let mut at = 0;
    while at + 12 <= rest.len() {
        let len = u32::from_be_bytes(rest[at..at + 4].try_into().ok()?) as usize;
        let data = rest.get(at + 8..(at + 8).checked_add(len)?)?;
        let kind = &rest[at + 4..at + 8];
        chunks.push((kind, data));
        at += 12 + len;
        if kind == b"IEND" {
            break;
        }
    }
    let (kind, ihdr) = *chunks.first()?;
    if kind != b"IHDR" || ihdr.len() != 13 {
        return None;
    }
    let color_type = if colors == 1 { 0 } else { 2 };
    // the header must say what the decoder made of it: no palette expanded, no depth changed
    let as_decoded = u32::from_be_bytes(ihdr[0..4].try_into().ok()?) == decoded.width()
        && u32::from_be_bytes(ihdr[4..8].try_into().ok()?) == decoded.height()
        && ihdr[8] == bits
        && ihdr[9] == color_type
        && ihdr[12] == 0;
    if !as_decoded || chunks.iter().any(|(kind, _)| *kind == b"tRNS") {
        return None;
    }
    let idat: Vec<u8> = chunks
        .iter()
        .filter(|(kind, _)| *kind == b"IDAT")
        .flat_map(|(_, data)| data.iter().copied())
        .collect();
    let row_bytes = decoded.width() as usize * colors as usize * bits as usize / 8;
    let expected = decoded.height() as usize * (row_bytes + 1);
    // one byte more than expected: data that inflates to more rows than declared is refused
    let mut rows = vec![0u8; expected + 1];
    let inflated = libdeflater::Decompressor::new()
        .zlib_decompress(&idat, &mut rows)
        .ok()?;
    let whole = inflated == expected
        && rows[..expected]
            .chunks_exact(row_bytes + 1)
            .all(|row| row[0] <= 4);
    whole.then(|| {
        let plane = Plane {
            colors,
            bits,
            width: decoded.width(),
            height: decoded.height(),
            len: idat.len() as u64,
        };
        (plane, idat)
    })
}

/// A PNG's bytes without its `iCCP` chunks, when it has any; `None` for anything else.
fn without_png_iccp(bytes: &[u8]) -> Option<Vec<u8>> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if !bytes.starts_with(SIGNATURE) {
        return None;
    }
    let mut chunks = Vec::new();
    let mut at = SIGNATURE.len();
    while at + 12 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().ok()?) as usize;
        let end = at.checked_add(12)?.checked_add(len)?.min(bytes.len());
        let last = &bytes[at + 4..at + 8] == b"IEND";
        chunks.push((&bytes[at + 4..at + 8], at..end));
        at = end;
        if last {
            break;
        }
    }
    if !chunks.iter().any(|(kind, _)| *kind == b"iCCP") {
        return None;
    }
    let mut out = SIGNATURE.to_vec();
    for (kind, range) in chunks {
        if kind != b"iCCP" {
            out.extend_from_slice(&bytes[range]);
        }
    }
    // anything after the chunks walked (damage) is kept for the decoder to judge
    out.extend_from_slice(&bytes[at.min(bytes.len())..]);
    Some(out)
}

/// A decoded JPEG: an image (CMYK turned to RGB) and, for CMYK, the samples as they are.
struct DecodedJpeg {
    image: image::DynamicImage,
    cmyk: Option<Vec<u8>>,
}

/// Decodes a JPEG strictly (a cut or damaged file is an error), at full size or — for a
/// thumbnail — at the smallest DCT scale that still covers one. `precision` is the frame's
/// bits per sample (from its header), to scale samples of other depths to 8 or 16 bits.
fn decode_jpeg(
    bytes: &[u8],
    precision: u8,
    for_thumbnail: bool,
) -> std::result::Result<DecodedJpeg, String> {
    use jpeg_decoder::{Decoder, Error as E, PixelFormat, UnsupportedFeature as U};
    let described = |e: E| match e {
        E::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the file ends before the image data does (cut short?)".to_string()
        }
        E::Unsupported(feature) => {
            let what = match feature {
                U::ArithmeticEntropyCoding => "arithmetic coding".to_string(),
                U::Hierarchical => "hierarchical coding".to_string(),
                U::SamplePrecision(bits) => format!("{bits}-bit samples"),
                other => format!("{other:?}"),
            };
            format!(
                "it is a JPEG with {what}, which PDF readers cannot show and lmcp cannot decode; \
                 save it as a baseline JPEG or a PNG first"
            )
        }
        other => other.to_string(),
    };
    let mut d = Decoder::new(std::io::Cursor::new(bytes));
    if for_thumbnail {
        d.scale(THUMB_EDGE as u16, THUMB_EDGE as u16)
            .map_err(described)?;
    }
    let mut px = d.decode().map_err(described)?;
    let info = d.info().ok_or("the JPEG has no frame header")?;
    let (w, h) = (info.width as u32, info.height as u32);
    // Lossless JPEGs may use 2-16 bits; samples come back at their own precision, so scale them
    // to the 8 or 16 bits a PDF image has (white stays white).
    let precision = precision.clamp(2, 16) as u32;
    let widen = |v: u32, to_bits: u32| {
        let (max_in, max_out) = ((1u32 << precision) - 1, (1u32 << to_bits) - 1);
        (v * max_out + max_in / 2) / max_in
    };
    match info.pixel_format {
        PixelFormat::L16 if precision < 16 => {
            for s in px.chunks_exact_mut(2) {
                let v = widen(u16::from_ne_bytes([s[0], s[1]]) as u32, 16) as u16;
                s.copy_from_slice(&v.to_ne_bytes());
            }
        }
        _ if precision < 8 => px.iter_mut().for_each(|v| *v = widen(*v as u32, 8) as u8),
        _ => {}
    }
    let short = || "the decoded JPEG is smaller than its header says".to_string();
    let image: image::DynamicImage = match info.pixel_format {
        PixelFormat::L8 => image::GrayImage::from_raw(w, h, px.clone())
            .ok_or_else(short)?
            .into(),
        PixelFormat::L16 => {
            let samples = px
                .chunks_exact(2)
                .map(|s| u16::from_ne_bytes([s[0], s[1]]))
                .collect();
            image::ImageBuffer::<image::Luma<u16>, Vec<u16>>::from_raw(w, h, samples)
                .ok_or_else(short)?
                .into()
        }
        PixelFormat::RGB24 => image::RgbImage::from_raw(w, h, px.clone())
            .ok_or_else(short)?
            .into(),
        PixelFormat::CMYK32 => {
            // The decoder has already undone Adobe's inversion: these are plain CMYK values.
            let rgb = px
                .chunks_exact(4)
                .flat_map(|p| {
                    let k = 255 - p[3] as u32;
                    [0, 1, 2].map(|i| ((255 - p[i] as u32) * k / 255) as u8)
                })
                .collect();
            image::RgbImage::from_raw(w, h, rgb)
                .ok_or_else(short)?
                .into()
        }
    };
    let cmyk = (info.pixel_format == PixelFormat::CMYK32).then_some(px);
    Ok(DecodedJpeg { image, cmyk })
}

fn orientation_of(o: image::metadata::Orientation) -> u8 {
    use image::metadata::Orientation::*;
    match o {
        NoTransforms => 1,
        FlipHorizontal => 2,
        Rotate180 => 3,
        FlipVertical => 4,
        Rotate90FlipH => 5,
        Rotate90 => 6,
        Rotate270FlipH => 7,
        Rotate270 => 8,
    }
}

fn be_bytes(samples: Vec<u16>) -> Vec<u8> {
    samples.iter().flat_map(|v| v.to_be_bytes()).collect()
}

/// The image's samples at their own depth (16 bits stay 16), split into colour and alpha planes
/// and compressed.
fn planes(img: image::DynamicImage, orientation: u8, source_sha256: &str) -> Prepared {
    use image::DynamicImage as D;
    let (w, h) = (img.width(), img.height());
    let (colors, bits, has_alpha, raw): (u8, u8, bool, Vec<u8>) = match img {
        D::ImageLuma8(i) => (1, 8, false, i.into_raw()),
        D::ImageLumaA8(i) => (2, 8, true, i.into_raw()),
        D::ImageRgb8(i) => (3, 8, false, i.into_raw()),
        D::ImageRgba8(i) => (4, 8, true, i.into_raw()),
        D::ImageLuma16(i) => (1, 16, false, be_bytes(i.into_raw())),
        D::ImageLumaA16(i) => (2, 16, true, be_bytes(i.into_raw())),
        D::ImageRgb16(i) => (3, 16, false, be_bytes(i.into_raw())),
        D::ImageRgba16(i) => (4, 16, true, be_bytes(i.into_raw())),
        other => (4, 8, true, other.to_rgba8().into_raw()),
    };
    planes_of(
        w,
        h,
        colors,
        bits,
        has_alpha,
        raw,
        orientation,
        source_sha256,
    )
}

/// Planes from raw interleaved samples: `colors` per pixel (the last one alpha when
/// `has_alpha`), `bits` each (16-bit big-endian).
#[allow(clippy::too_many_arguments)]
fn planes_of(
    w: u32,
    h: u32,
    colors: u8,
    bits: u8,
    has_alpha: bool,
    raw: Vec<u8>,
    orientation: u8,
    source_sha256: &str,
) -> Prepared {
    let size = bits as usize / 8;
    let px = colors as usize * size;
    let prepared = |color, mask| flate_prepared((w, h), orientation, source_sha256, color, mask);
    if !has_alpha {
        return prepared(flate::encode(&raw, w, h, colors, bits), None);
    }
    // alpha is the last sample of each pixel; an image whose alpha is all opaque needs no mask
    let alpha_at = px - size;
    let opaque = raw
        .chunks_exact(px)
        .all(|p| p[alpha_at..].iter().all(|v| *v == 0xFF));
    // Colour and alpha are filtered row by row straight out of the interleaved samples.
    let row_px = px * w as usize;
    let color = flate::encode_rows(w, h, colors - 1, bits, |r, row| {
        let pixels = raw[r * row_px..(r + 1) * row_px].chunks_exact(px);
        if px == 4 {
            // RGBA at 8 bits, by far the commonest: moves of a fixed size, unrolled
            for (out, p) in row.chunks_exact_mut(3).zip(pixels) {
                out.copy_from_slice(&p[..3]);
            }
        } else {
            for (out, p) in row.chunks_exact_mut(alpha_at).zip(pixels) {
                out.copy_from_slice(&p[..alpha_at]);
            }
        }
    });
    let mask = (!opaque).then(|| {
        flate::encode_rows(w, h, 1, bits, |r, row| {
            let pixels = raw[r * row_px..(r + 1) * row_px].chunks_exact(px);
            if size == 1 {
                for (out, p) in row.iter_mut().zip(pixels) {
                    *out = p[alpha_at];
                }
            } else {
                for (out, p) in row.chunks_exact_mut(size).zip(pixels) {
                    out.copy_from_slice(&p[alpha_at..]);
                }
            }
        })
    });
    drop(raw);
    prepared(color, mask)
}

/// [`planes_of`]'s result from its compressed colour and (optional) mask planes.
fn flate_prepared(
    (w, h): (u32, u32),
    orientation: u8,
    source_sha256: &str,
    (color_plane, color_bytes): (flate::Plane, Vec<u8>),
    mask: Option<(flate::Plane, Vec<u8>)>,
) -> Prepared {
    let (mask, mask_bytes) = match mask {
        Some((plane, bytes)) => (Some(plane), bytes),
        None => (None, Vec::new()),
    };
    Prepared::new(
        PreparedHeader {
            format: PREPARED_FORMAT,
            source_sha256: source_sha256.to_string(),
            width: w,
            height: h,
            orientation,
            color: color_plane,
            mask,
            dct: None,
        },
        color_bytes,
        mask_bytes,
    )
}

/// The image shrunk to fit in `edge` × `edge` (never enlarged), each pixel the plain mean of
/// the source pixels it covers: 8-bit gray, gray and alpha, RGB or RGBA as the source is
/// (other kinds are made 8-bit first). A few times faster than `image`'s own, which counts.
fn shrink(img: &image::DynamicImage, edge: u32) -> image::DynamicImage {
    use image::DynamicImage as D;
    let (w, h) = (img.width(), img.height());
    let scale = (f64::from(edge) / f64::from(w)).min(f64::from(edge) / f64::from(h));
    if scale >= 1.0 {
        return img.clone();
    }
    let tw = ((f64::from(w) * scale).round() as u32).max(1);
    let th = ((f64::from(h) * scale).round() as u32).max(1);
    let converted;
    let (raw, channels): (&[u8], usize) = match img {
        D::ImageLuma8(i) => (i.as_raw(), 1),
        D::ImageLumaA8(i) => (i.as_raw(), 2),
        D::ImageRgb8(i) => (i.as_raw(), 3),
        D::ImageRgba8(i) => (i.as_raw(), 4),
        other if other.color().has_alpha() => {
            converted = other.to_rgba8().into_raw();
            (&converted, 4)
        }
        other => {
            converted = other.to_rgb8().into_raw();
            (&converted, 3)
        }
    };
    // the source columns (rows) each target column (row) covers
    let spans = |from: u32, to: u32| -> Vec<(usize, usize)> {
        (0..to as u64)
            .map(|t| {
                let start = (t * u64::from(from) / u64::from(to)) as usize;
                let end = (((t + 1) * u64::from(from) / u64::from(to)) as usize).max(start + 1);
                (start, end)
            })
            .collect()
    };
    let (cols, rows) = (spans(w, tw), spans(h, th));
    let stride = w as usize * channels;
    let mut out = Vec::with_capacity(tw as usize * th as usize * channels);
    let mut sums = vec![0u32; tw as usize * channels];
    for &(y0, y1) in &rows {
        sums.iter_mut().for_each(|s| *s = 0);
        for row in raw[y0 * stride..y1 * stride].chunks_exact(stride) {
            for (t, &(x0, x1)) in cols.iter().enumerate() {
                let sum = &mut sums[t * channels..(t + 1) * channels];
                for px in row[x0 * channels..x1 * channels].chunks_exact(channels) {
                    for (s, v) in sum.iter_mut().zip(px) {
                        *s += u32::from(*v);
                    }
                }
            }
        }
        for (t, &(x0, x1)) in cols.iter().enumerate() {
            let n = ((x1 - x0) * (y1 - y0)) as u32;
            out.extend(
                sums[t * channels..(t + 1) * channels]
                    .iter()
                    .map(|s| ((s + n / 2) / n) as u8),
            );
        }
    }
    // exactly tw × th pixels of `channels` samples, so these cannot fail
    match channels {
        1 => image::GrayImage::from_raw(tw, th, out).map(D::ImageLuma8),
        2 => image::GrayAlphaImage::from_raw(tw, th, out).map(D::ImageLumaA8),
        3 => image::RgbImage::from_raw(tw, th, out).map(D::ImageRgb8),
        _ => image::RgbaImage::from_raw(tw, th, out).map(D::ImageRgba8),
    }
    .expect("the shrunk picture has its size's samples")
}

fn thumbnail(img: &image::DynamicImage, orientation: u8) -> std::result::Result<Vec<u8>, String> {
    let mut t = shrink(img, THUMB_EDGE);
    if let Some(o) = image::metadata::Orientation::from_exif(orientation) {
        t.apply_orientation(o);
    }
    let mut out = std::io::Cursor::new(Vec::new());
    if t.color().has_alpha() {
        image::DynamicImage::ImageRgba8(t.to_rgba8())
            .write_to(&mut out, image::ImageFormat::Png)
            .map_err(|e| e.to_string())?;
    } else {
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 80)
            .encode_image(&image::DynamicImage::ImageRgb8(t.to_rgb8()))
            .map_err(|e| e.to_string())?;
    }
    Ok(out.into_inner())
}

/// The media type of a thumbnail's bytes (for a `data:` URL).
pub fn thumb_media_type(bytes: &[u8]) -> &'static str {
    if bytes.starts_with(b"\x89PNG") {
        "image/png"
    } else {
        "image/jpeg"
    }
}

impl Analysis {
    /// The files to keep beside asset `N`: each name's ending (after `N`) and its content in
    /// parts — the prepared planes (if any) and the thumbnail.
    pub fn files(&self) -> Vec<(&'static str, Vec<&[u8]>)> {
        let mut files = Vec::new();
        if let Some(p) = &self.prepared {
            files.push((
                PREPARED_SUFFIX,
                vec![p.header_line.as_slice(), &p.color, &p.mask],
            ));
        }
        files.push((THUMB_SUFFIX, vec![self.thumbnail.as_slice()]));
        files
    }
}

/// Stores what an analysis made beside asset `asset_id`, each file atomically.
pub fn store(assets_dir: &Path, asset_id: u64, analysis: &Analysis) -> Result<()> {
    for (suffix, parts) in analysis.files() {
        store::atomic_write_parts(&assets_dir.join(format!("{asset_id}{suffix}")), &parts)?;
    }
    Ok(())
}

/// An asset's prepared planes on disk: their description and where the data starts.
pub struct OnDisk {
    /// The description.
    pub header: PreparedHeader,
    /// The file.
    pub path: PathBuf,
    /// Offset of the colour bytes in the file.
    pub data_at: u64,
}

/// Reads a prepared file's description if it is there, current, made from `source_sha256` and
/// whole; `None` means it must be made again.
pub fn load(assets_dir: &Path, asset_id: u64, source_sha256: &str) -> Option<OnDisk> {
    let path = prepared_path(assets_dir, asset_id);
    let file = File::open(&path).ok()?;
    let total = file.metadata().ok()?.len();
    let mut line = Vec::new();
    BufReader::new(file.take(64 * 1024))
        .read_until(b'\n', &mut line)
        .ok()?;
    let header: PreparedHeader = serde_json::from_slice(&line).ok()?;
    let data = header.color.len + header.mask.as_ref().map_or(0, |m| m.len);
    let whole = header.format == PREPARED_FORMAT
        && header.source_sha256 == source_sha256
        && line.len() as u64 + data == total;
    whole.then_some(OnDisk {
        header,
        path,
        data_at: line.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(img: image::DynamicImage) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn an_opaque_rgba_image_gets_no_mask_and_a_translucent_one_does() {
        let opaque = image::RgbaImage::from_pixel(8, 4, image::Rgba([1, 2, 3, 255]));
        let a = analyse(&png(opaque.into()), "x", ImageBudget::default(), &|| false).unwrap();
        let p = a.prepared.unwrap();
        assert_eq!((p.header.color.colors, p.header.mask), (3, None));
        let see_through = image::RgbaImage::from_pixel(8, 4, image::Rgba([1, 2, 3, 9]));
        let a = analyse(
            &png(see_through.into()),
            "x",
            ImageBudget::default(),
            &|| false,
        )
        .unwrap();
        let p = a.prepared.unwrap();
        let mask = p.header.mask.unwrap();
        assert_eq!((mask.colors, mask.bits), (1, 8));
        assert_eq!(
            (p.color.len() as u64, p.mask.len() as u64),
            (p.header.color.len, mask.len)
        );
        assert_eq!(thumb_media_type(&a.thumbnail), "image/png");
    }

    /// A PNG file's IDAT data, joined.
    fn idat(png: &[u8]) -> Vec<u8> {
        let mut at = 8;
        let mut out = Vec::new();
        while at + 12 <= png.len() {
            let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
            if &png[at + 4..at + 8] == b"IDAT" {
                out.extend_from_slice(&png[at + 8..at + 8 + len]);
            }
            at += 12 + len;
        }
        out
    }

    /// CRC-32 (IEEE) of a chunk's type and data.
    fn crc(kind: &[u8], data: &[u8]) -> [u8; 4] {
        let mut crc = 0xFFFF_FFFFu32;
        for b in kind.iter().chain(data) {
            crc ^= u32::from(*b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        (!crc).to_be_bytes()
    }

    /// `png` with a chunk put right after its header (IHDR ends at byte 33), CRC and all.
    fn with_chunk(png: &[u8], kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut out = png[..33].to_vec();
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc(kind, data));
        out.extend_from_slice(&png[33..]);
        out
    }

    /// An opaque gray or RGB PNG keeps its own compressed rows (what img2pdf embeds too, so a
    /// page is never larger than its); one with a transparent colour, or with alpha, or whose
    /// data holds more rows than its header says, is encoded anew.
    #[test]
    fn an_opaque_png_keeps_its_own_rows_and_others_are_encoded_anew() {
        let rgb = image::RgbImage::from_fn(40, 30, |x, y| image::Rgb([x as u8 * 6, y as u8, 7]));
        let bytes = png(rgb.clone().into());
        let p = analyse(&bytes, "x", ImageBudget::default(), &|| false)
            .unwrap()
            .prepared
            .unwrap();
        assert_eq!(p.color, idat(&bytes));
        assert_eq!((p.header.color.colors, p.header.color.bits), (3, 8));
        assert_eq!(
            (p.header.color.len, p.header.mask),
            (p.color.len() as u64, None)
        );
        let gray = image::ImageBuffer::<image::Luma<u16>, _>::from_fn(9, 5, |x, _| {
            image::Luma([x as u16 * 7000])
        });
        let bytes = png(image::DynamicImage::ImageLuma16(gray));
        let p = analyse(&bytes, "x", ImageBudget::default(), &|| false)
            .unwrap()
            .prepared
            .unwrap();
        assert_eq!(p.color, idat(&bytes));
        assert_eq!((p.header.color.colors, p.header.color.bits), (1, 16));
        // a transparent colour (tRNS: this red, at 16 bits a sample) gives the picture alpha
        let keyed = with_chunk(&png(rgb.clone().into()), b"tRNS", &[0, 0, 0, 0, 0, 7]);
        let p = analyse(&keyed, "x", ImageBudget::default(), &|| false)
            .unwrap()
            .prepared
            .unwrap();
        assert_ne!(p.color, idat(&keyed));
        assert!(p.header.mask.is_some());
        // rows beyond the header's height: never passed on to a PDF reader as they are
        let taller = image::RgbImage::from_fn(40, 31, |x, y| image::Rgb([x as u8 * 6, y as u8, 7]));
        let mut cut = png(taller.into());
        cut[20..24].copy_from_slice(&30u32.to_be_bytes());
        let ihdr_crc = crc(b"IHDR", &cut[16..29]);
        cut[29..33].copy_from_slice(&ihdr_crc);
        if let Ok(a) = analyse(&cut, "x", ImageBudget::default(), &|| false) {
            assert_ne!(a.prepared.unwrap().color, idat(&cut));
        }
    }

    #[test]
    fn sixteen_bit_samples_stay_sixteen_bits() {
        let img =
            image::ImageBuffer::<image::Rgba<u16>, _>::from_pixel(5, 3, image::Rgba([1, 2, 3, 4]));
        let p = analyse(
            &png(image::DynamicImage::ImageRgba16(img)),
            "x",
            ImageBudget::default(),
            &|| false,
        )
        .unwrap()
        .prepared
        .unwrap();
        assert_eq!(p.header.color.bits, 16);
        assert_eq!(p.header.mask.unwrap().bits, 16);
    }

    #[test]
    fn stored_planes_load_back_and_stale_or_cut_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let img = image::RgbImage::from_pixel(6, 6, image::Rgb([9, 8, 7]));
        let a = analyse(&png(img.into()), "abc", ImageBudget::default(), &|| false).unwrap();
        assert_eq!(thumb_media_type(&a.thumbnail), "image/jpeg");
        store(dir.path(), 3, &a).unwrap();
        let on_disk = load(dir.path(), 3, "abc").unwrap();
        assert_eq!(&on_disk.header, &a.prepared.as_ref().unwrap().header);
        let data = std::fs::read(&on_disk.path).unwrap()[on_disk.data_at as usize..].to_vec();
        let p = a.prepared.as_ref().unwrap();
        assert_eq!(data, [p.color.as_slice(), p.mask.as_slice()].concat());
        assert!(load(dir.path(), 3, "another source").is_none());
        let path = prepared_path(dir.path(), 3);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(
            load(dir.path(), 3, "abc").is_none(),
            "a cut file is not used"
        );
        assert!(load(dir.path(), 4, "abc").is_none());
    }

    fn jpeg(w: u32, h: u32) -> Vec<u8> {
        let img =
            image::RgbImage::from_fn(w, h, |x, y| image::Rgb([(x * 7) as u8, (y * 5) as u8, 99]));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
        out.into_inner()
    }

    #[test]
    fn a_jpeg_gets_a_small_upright_thumbnail_and_no_planes() {
        let a = analyse(&jpeg(960, 640), "x", ImageBudget::default(), &|| false).unwrap();
        assert!(a.prepared.is_none(), "embedded as it is");
        assert_eq!((a.width, a.height), (960, 640));
        let t = image::load_from_memory(&a.thumbnail).unwrap();
        assert_eq!((t.width(), t.height()), (THUMB_EDGE, 160));
    }

    #[test]
    fn a_cut_or_damaged_jpeg_is_refused() {
        let whole = jpeg(300, 200);
        let e = analyse(
            &whole[..whole.len() / 2],
            "x",
            ImageBudget::default(),
            &|| false,
        )
        .err()
        .unwrap();
        assert!(e.contains("cut short"), "{e}");
        let mut damaged = whole.clone();
        let mid = damaged.len() / 2;
        for b in &mut damaged[mid..mid + 400] {
            *b ^= 0x5a;
        }
        assert!(analyse(&damaged, "x", ImageBudget::default(), &|| false).is_err());
    }

    #[test]
    fn an_adobe_cmyk_jpeg_thumbnail_has_its_true_colours() {
        let bytes = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/cmyk-adobe.jpg"
        ))
        .unwrap();
        let a = analyse(&bytes, "x", ImageBudget::default(), &|| false).unwrap();
        let t = image::load_from_memory(&a.thumbnail).unwrap().to_rgb8();
        let red = t.get_pixel(t.width() / 4, t.height() / 4);
        assert!(red[0] > 200 && red[1] < 60 && red[2] < 60, "{red:?}");
    }

    #[test]
    fn shrinking_averages_what_each_pixel_covers_and_never_enlarges() {
        // 4×2 RGB: left half black, right half white, shrunk to 2×1: one of each
        let img =
            image::RgbImage::from_fn(4, 2, |x, _| image::Rgb([if x < 2 { 0 } else { 255 }; 3]));
        let small = shrink(&img.into(), 2).to_rgb8();
        assert_eq!(small.dimensions(), (2, 1));
        assert_eq!(small.get_pixel(0, 0).0, [0; 3]);
        assert_eq!(small.get_pixel(1, 0).0, [255; 3]);
        // the mean rounds: a 2×1 of 0 and 1 → 1
        let gray = image::GrayImage::from_raw(2, 1, vec![0, 1]).unwrap();
        assert_eq!(shrink(&gray.into(), 1).to_luma8().into_raw(), [1]);
        // aspect kept, edge respected, alpha kept, small images left as they are
        let rgba = image::RgbaImage::from_pixel(1000, 250, image::Rgba([1, 2, 3, 4]));
        let t = shrink(&rgba.into(), THUMB_EDGE);
        assert_eq!((t.width(), t.height()), (THUMB_EDGE, 60));
        assert_eq!(t.to_rgba8().get_pixel(7, 7).0, [1, 2, 3, 4]);
        let tiny = image::RgbImage::new(3, 3);
        assert_eq!(shrink(&tiny.into(), THUMB_EDGE).width(), 3);
        // 16-bit sources are made 8-bit
        let deep = image::ImageBuffer::<image::Rgb<u16>, _>::from_pixel(
            500,
            500,
            image::Rgb([65535, 0, 0]),
        );
        let t = shrink(&image::DynamicImage::ImageRgb16(deep), 100).to_rgb8();
        assert_eq!(t.get_pixel(50, 50).0, [255, 0, 0]);
    }

    /// An ICC profile that inflates to gigabytes is never inflated: the chunk is left out.
    #[test]
    fn a_png_icc_profile_is_left_out_before_decoding() {
        let plain = png(image::RgbImage::from_pixel(10, 10, image::Rgb([1, 2, 3])).into());
        assert!(without_png_iccp(&plain).is_none());
        // a 1 GB profile of zeros, deflated (about 1 MB)
        let mut c = libdeflater::Compressor::new(libdeflater::CompressionLvl::best());
        let zeros = vec![0u8; 64 << 20];
        let mut z = vec![0u8; c.zlib_compress_bound(zeros.len())];
        let n = c.zlib_compress(&zeros, &mut z).unwrap();
        let mut data = b"icc\0\0".to_vec();
        data.extend_from_slice(&z[..n]);
        let mut chunk = (data.len() as u32).to_be_bytes().to_vec();
        chunk.extend_from_slice(b"iCCP");
        chunk.extend_from_slice(&data);
        chunk.extend_from_slice(&[0, 0, 0, 0]); // the decoder never sees it, so no CRC
        let ihdr_end = 8 + 12 + 13;
        let mut bomb = plain[..ihdr_end].to_vec();
        bomb.extend_from_slice(&chunk);
        bomb.extend_from_slice(&plain[ihdr_end..]);
        let stripped = without_png_iccp(&bomb).unwrap();
        assert_eq!(stripped, plain);
        let a = analyse(&bomb, "x", ImageBudget::default(), &|| false).unwrap();
        assert_eq!((a.width, a.height), (10, 10));
    }

    #[test]
    fn a_damaged_file_does_not_analyse() {
        let mut bytes = png(image::RgbImage::from_pixel(40, 40, image::Rgb([1, 2, 3])).into());
        bytes.truncate(bytes.len() / 2);
        assert!(analyse(&bytes, "x", ImageBudget::default(), &|| false).is_err());
        assert!(analyse(b"not an image", "x", ImageBudget::default(), &|| false).is_err());
    }
}

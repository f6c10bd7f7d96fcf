//! `build_image_pdf`: a workspace's images, in a given order, as one PDF — lossless.
//!
//! JPEGs a PDF reader can show are embedded byte for byte as `DCTDecode` streams (no decode and
//! re-encode); CMYK JPEGs written the Adobe way get the inverting `Decode` array. Every other
//! image (PNG of any depth, palette, GIF, WebP, TIFF, BMP, and JPEGs PDF cannot show) is decoded
//! and stored with Flate at its own bit depth (16 bits stay 16 bits), rows PNG-filtered (Paeth,
//! `/Predictor 15`) and compressed with zlib's *filtered* strategy; alpha becomes an `SMask`.
//! EXIF orientation is honoured by the placement matrix, so pixels are never rotated.
//!
//! The document is built with printpdf and finished on its lopdf form: masks nested in an image
//! dictionary are moved into objects of their own (a nested stream is not valid PDF), the header
//! says 1.4 (masks need it) and the info dates are real. The result is written to a temporary
//! folder and renamed into place, so a failure never leaves half a result.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use printpdf::{
    CurTransMat, DictItem, ExternalStream, ExternalXObject, Mm, Op, PdfDocument, PdfPage,
    PdfSaveOptions, XObjectTransform,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::gate::CallContext;
use crate::host::Host;
use crate::registry::{Annotations, Effect, Handler, ToolSpec, handler};
use crate::store;
use crate::tools::{assets, jpeg};

/// Margin around each image, in millimetres.
pub const MARGIN_MM: f32 = 10.0;

/// The spec, with exactly the seed's input schema.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        "build_image_pdf",
        "Build a PDF from images",
        "Build one PDF from a workspace's images, one per page in the given order, fitted inside a \
         margin and centred (square 210×210 mm, portrait A4 or landscape A4). JPEGs are embedded \
         byte for byte; other images losslessly, with transparency. Writes document.pdf, \
         manifest.json and preview.html to a new output folder.",
        json!({
            "type": "object",
            "properties": {
                "workspace_id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
                "source_asset_ids": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1, "maxItems": 20},
                "title": {"type": "string", "minLength": 1, "maxLength": 200},
                "preset": {"type": "string", "enum": ["square", "portrait", "landscape"]}
            },
            "required": ["workspace_id", "source_asset_ids", "title", "preset"],
            "additionalProperties": false
        }),
    )
    .effect(Effect::Write, Annotations::changing(false, false, false))
    .summary(|a| format!("build a PDF of {} image(s)", a["source_asset_ids"].as_array().map_or(0, Vec::len)))
    .output(json!({
        "type": "object",
        "properties": {
            "stage": {"type": "string", "enum": ["ready", "failed"]},
            "output_directory": {"type": "string"},
            "file_path": {"type": "string"},
            "manifest_path": {"type": "string"},
            "preview_path": {"type": "string"},
            "title": {"type": "string"},
            "preset": {"type": "string"},
            "pages": {"type": "array", "items": {"type": "object", "properties": {"source_asset_id": {"type": "integer"}}, "required": ["source_asset_id"]}},
            "retryable": {"type": "boolean"},
            "error": {"type": "string"}
        },
        "required": ["stage", "title", "preset", "pages"]
    }))
}

/// The handler: builds on a blocking thread, reporting progress per page.
pub fn handler_fn() -> Handler {
    handler(|inv| async move {
        let (host, args, ctx) = (inv.host, inv.args, inv.ctx);
        let title = args["title"].as_str().unwrap_or("").to_string();
        let preset = args["preset"].as_str().unwrap_or("portrait").to_string();
        let result = tokio::task::spawn_blocking(move || build(&host, &args, &ctx))
            .await
            .map_err(|e| Error::tool("build_image_pdf", e.to_string()))?;
        Ok(match result {
            Ok(v) => v,
            Err(e) => {
                // Unknown assets and bad images will fail again; file-system trouble may not.
                let retryable = matches!(e, Error::Io { .. });
                json!({"stage": "failed", "title": title, "preset": preset, "pages": [], "retryable": retryable, "error": e.to_string()})
            }
        })
    })
}

fn page_size(preset: &str) -> (f32, f32) {
    match preset {
        "square" => (210.0, 210.0),
        "landscape" => (297.0, 210.0),
        _ => (210.0, 297.0),
    }
}

/// One image, ready to embed.
struct Embedded {
    stream: ExternalStream,
    width: u32,
    height: u32,
    orientation: u8,
    how: &'static str,
    /// The preview thumbnail (base64 PNG), made from the same decode when there is one.
    thumb: Option<String>,
}

fn dict(entries: Vec<(&str, DictItem)>) -> std::collections::BTreeMap<String, DictItem> {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn name(s: &str) -> DictItem {
    DictItem::Name(s.as_bytes().to_vec())
}

/// zlib with the *filtered* strategy at a low level: fast, and small on PNG-filtered rows.
fn deflate(data: &[u8]) -> Vec<u8> {
    use miniz_oxide::deflate::core::{
        CompressionStrategy, CompressorOxide, TDEFLFlush, TDEFLStatus, compress,
        create_comp_flags_from_zip_params,
    };
    let flags = create_comp_flags_from_zip_params(3, 15, CompressionStrategy::Filtered as i32);
    let mut c = CompressorOxide::new(flags);
    let mut out = vec![0u8; (data.len() / 2).max(64)];
    let mut pos = 0;
    let mut input = data;
    loop {
        let (status, used, written) = compress(&mut c, input, &mut out[pos..], TDEFLFlush::Finish);
        pos += written;
        input = &input[used..];
        match status {
            TDEFLStatus::Done => break,
            TDEFLStatus::Okay => {
                if out.len() - pos < 64 {
                    out.resize(out.len() * 2, 0);
                }
            }
            _ => break,
        }
    }
    out.truncate(pos);
    out
}

/// Rows PNG-filtered with Paeth (each row led by its filter byte), for `/Predictor 15`.
fn paeth_rows(data: &[u8], row_bytes: usize, bpp: usize) -> Vec<u8> {
    let rows = data.len() / row_bytes.max(1);
    let mut out = Vec::with_capacity(data.len() + rows);
    for r in 0..rows {
        let row = &data[r * row_bytes..(r + 1) * row_bytes];
        let up = if r == 0 {
            None
        } else {
            Some(&data[(r - 1) * row_bytes..r * row_bytes])
        };
        out.push(4u8);
        for i in 0..row_bytes {
            let a = if i >= bpp { row[i - bpp] as i16 } else { 0 };
            let b = up.map_or(0, |u| u[i] as i16);
            let c = if i >= bpp {
                up.map_or(0, |u| u[i - bpp] as i16)
            } else {
                0
            };
            let p = a + b - c;
            let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
            let pred = if pa <= pb && pa <= pc {
                a
            } else if pb <= pc {
                b
            } else {
                c
            };
            out.push(row[i].wrapping_sub(pred as u8));
        }
    }
    out
}

fn flate_image(
    data: &[u8],
    width: u32,
    height: u32,
    colors: usize,
    bits: usize,
    color_space: &str,
) -> ExternalStream {
    let bpp = (colors * bits / 8).max(1);
    let row_bytes = width as usize * colors * bits / 8;
    let filtered = paeth_rows(data, row_bytes, bpp);
    let _ = height;
    ExternalStream {
        dict: dict(vec![
            ("Type", name("XObject")),
            ("Subtype", name("Image")),
            ("Width", DictItem::Int(width as i64)),
            ("Height", DictItem::Int(height as i64)),
            ("ColorSpace", name(color_space)),
            ("BitsPerComponent", DictItem::Int(bits as i64)),
            ("Filter", name("FlateDecode")),
            (
                "DecodeParms",
                DictItem::Dict {
                    map: dict(vec![
                        ("Predictor", DictItem::Int(15)),
                        ("Colors", DictItem::Int(colors as i64)),
                        ("BitsPerComponent", DictItem::Int(bits as i64)),
                        ("Columns", DictItem::Int(width as i64)),
                    ]),
                },
            ),
        ]),
        content: deflate(&filtered),
        compress: false,
    }
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

/// Splits interleaved samples into colour and alpha planes (`size` bytes per sample).
fn split_alpha(data: &[u8], channels: usize, size: usize) -> (Vec<u8>, Vec<u8>, bool) {
    let px = channels * size;
    let mut color = Vec::with_capacity(data.len() / channels * (channels - 1));
    let mut alpha = Vec::with_capacity(data.len() / channels);
    let mut opaque = true;
    for p in data.chunks_exact(px) {
        color.extend_from_slice(&p[..px - size]);
        let a = &p[px - size..];
        opaque &= a.iter().all(|b| *b == 0xFF);
        alpha.extend_from_slice(a);
    }
    (color, alpha, opaque)
}

fn embed(bytes: &[u8]) -> Result<Embedded> {
    if let Ok(info) = jpeg::read_info(bytes)
        && info.pdf_can_embed()
    {
        let color_space = match info.components {
            1 => "DeviceGray",
            4 => "DeviceCMYK",
            _ => "DeviceRGB",
        };
        let mut d = dict(vec![
            ("Type", name("XObject")),
            ("Subtype", name("Image")),
            ("Width", DictItem::Int(info.width as i64)),
            ("Height", DictItem::Int(info.height as i64)),
            ("ColorSpace", name(color_space)),
            ("BitsPerComponent", DictItem::Int(8)),
            ("Filter", name("DCTDecode")),
        ]);
        if info.inverted_cmyk() {
            d.insert(
                "Decode".into(),
                DictItem::Array(
                    [1, 0, 1, 0, 1, 0, 1, 0]
                        .iter()
                        .map(|v| DictItem::Int(*v))
                        .collect(),
                ),
            );
        }
        return Ok(Embedded {
            stream: ExternalStream {
                dict: d,
                content: bytes.to_vec(),
                compress: false,
            },
            width: info.width as u32,
            height: info.height as u32,
            orientation: info.orientation,
            how: "jpeg-passthrough",
            thumb: thumbnail(bytes, info.orientation),
        });
    }
    use image::ImageDecoder;
    let reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| Error::tool("build_image_pdf", format!("cannot read an image: {e}")))?;
    let mut decoder = reader
        .into_decoder()
        .map_err(|e| Error::tool("build_image_pdf", format!("cannot decode an image: {e}")))?;
    let orientation = decoder.orientation().map(orientation_of).unwrap_or(1);
    let img = image::DynamicImage::from_decoder(decoder)
        .map_err(|e| Error::tool("build_image_pdf", format!("cannot decode an image: {e}")))?;
    let (w, h) = (img.width(), img.height());
    let thumb = thumb_of(&img, orientation);
    use image::DynamicImage as D;
    let (colors, bits, has_alpha, raw): (usize, usize, bool, Vec<u8>) = match img {
        D::ImageLuma8(i) => (1, 8, false, i.into_raw()),
        D::ImageLumaA8(i) => (2, 8, true, i.into_raw()),
        D::ImageRgb8(i) => (3, 8, false, i.into_raw()),
        D::ImageRgba8(i) => (4, 8, true, i.into_raw()),
        D::ImageLuma16(i) => (
            1,
            16,
            false,
            i.into_raw().iter().flat_map(|v| v.to_be_bytes()).collect(),
        ),
        D::ImageLumaA16(i) => (
            2,
            16,
            true,
            i.into_raw().iter().flat_map(|v| v.to_be_bytes()).collect(),
        ),
        D::ImageRgb16(i) => (
            3,
            16,
            false,
            i.into_raw().iter().flat_map(|v| v.to_be_bytes()).collect(),
        ),
        D::ImageRgba16(i) => (
            4,
            16,
            true,
            i.into_raw().iter().flat_map(|v| v.to_be_bytes()).collect(),
        ),
        other => (4, 8, true, other.to_rgba8().into_raw()),
    };
    let size = bits / 8;
    let (color, alpha, opaque) = if has_alpha {
        split_alpha(&raw, colors, size)
    } else {
        (raw, Vec::new(), true)
    };
    let color_colors = if has_alpha { colors - 1 } else { colors };
    let space = if color_colors == 1 {
        "DeviceGray"
    } else {
        "DeviceRGB"
    };
    let mut stream = flate_image(&color, w, h, color_colors, bits, space);
    if has_alpha && !opaque {
        let mask = flate_image(&alpha, w, h, 1, bits, "DeviceGray");
        stream
            .dict
            .insert("SMask".into(), DictItem::Stream { stream: mask });
    }
    Ok(Embedded {
        stream,
        width: w,
        height: h,
        orientation,
        how: "flate",
        thumb,
    })
}

/// The placement matrix: the unit square to the display box, honouring EXIF orientation.
pub fn placement(orientation: u8, x0: f32, y0: f32, w: f32, h: f32) -> [f32; 6] {
    let (a, b, c, d, e, f): (f32, f32, f32, f32, f32, f32) = match orientation {
        2 => (-1.0, 0.0, 0.0, 1.0, 1.0, 0.0),
        3 => (-1.0, 0.0, 0.0, -1.0, 1.0, 1.0),
        4 => (1.0, 0.0, 0.0, -1.0, 0.0, 1.0),
        5 => (0.0, -1.0, -1.0, 0.0, 1.0, 1.0),
        6 => (0.0, -1.0, 1.0, 0.0, 0.0, 1.0),
        7 => (0.0, 1.0, 1.0, 0.0, 0.0, 0.0),
        8 => (0.0, 1.0, -1.0, 0.0, 1.0, 0.0),
        _ => (1.0, 0.0, 0.0, 1.0, 0.0, 0.0),
    };
    [w * a, h * b, w * c, h * d, x0 + w * e, y0 + h * f]
}

fn mm_to_pt(mm: f32) -> f32 {
    mm * 72.0 / 25.4
}

fn thumbnail(bytes: &[u8], orientation: u8) -> Option<String> {
    thumb_of(&image::load_from_memory(bytes).ok()?, orientation)
}

fn thumb_of(img: &image::DynamicImage, orientation: u8) -> Option<String> {
    let mut t = img.thumbnail(240, 240);
    if let Some(o) = image::metadata::Orientation::from_exif(orientation) {
        t.apply_orientation(o);
    }
    let mut png = std::io::Cursor::new(Vec::new());
    t.write_to(&mut png, image::ImageFormat::Png).ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(png.into_inner()))
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Builds the PDF, manifest and preview; returns the `ready` result.
pub fn build(host: &Arc<Host>, args: &Value, ctx: &CallContext) -> Result<Value> {
    let id = args["workspace_id"].as_str().unwrap_or("");
    let title = args["title"].as_str().unwrap_or("").to_string();
    let preset = args["preset"].as_str().unwrap_or("portrait").to_string();
    let ids: Vec<u64> = args["source_asset_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect();
    let ws = assets::workspace_dir(host, id)?;
    // Every asset must exist before any work starts.
    let mut sources = Vec::new();
    for asset_id in &ids {
        let (a, path) = assets::asset(host, id, *asset_id)?;
        sources.push((a, path));
    }
    let (pw, ph) = page_size(&preset);
    let mut doc = PdfDocument::new(&title);
    let now = printpdf::OffsetDateTime::now_utc();
    doc.metadata.info.creation_date = now;
    doc.metadata.info.modification_date = now;
    doc.metadata.info.metadata_date = now;
    doc.metadata.info.producer = format!("lmcp {}", env!("CARGO_PKG_VERSION"));
    let mut pages = Vec::new();
    let mut manifest_pages = Vec::new();
    let mut previews = Vec::new();
    let total = sources.len() as u64;
    let prepared = prepare_pages(&sources, ctx)?;
    for (n, ((asset, _), embedded)) in sources.iter().zip(prepared).enumerate() {
        let _ = n;
        let (dw, dh) = if embedded.orientation >= 5 {
            (embedded.height as f32, embedded.width as f32)
        } else {
            (embedded.width as f32, embedded.height as f32)
        };
        let (bw, bh) = (pw - 2.0 * MARGIN_MM, ph - 2.0 * MARGIN_MM);
        let scale = (bw / dw).min(bh / dh);
        let (w_mm, h_mm) = (dw * scale, dh * scale);
        let (x_mm, y_mm) = ((pw - w_mm) / 2.0, (ph - h_mm) / 2.0);
        let m = placement(
            embedded.orientation,
            mm_to_pt(x_mm),
            mm_to_pt(y_mm),
            mm_to_pt(w_mm),
            mm_to_pt(h_mm),
        );
        let xobject = doc.add_xobject(&ExternalXObject {
            stream: embedded.stream,
            width: None,
            height: None,
            dpi: None,
        });
        pages.push(PdfPage::new(
            Mm(pw),
            Mm(ph),
            vec![
                Op::SaveGraphicsState,
                Op::SetTransformationMatrix {
                    matrix: CurTransMat::Raw(m),
                },
                Op::UseXobject {
                    id: xobject,
                    transform: XObjectTransform {
                        no_auto_scale: true,
                        ..Default::default()
                    },
                },
                Op::RestoreGraphicsState,
            ],
        ));
        manifest_pages.push(json!({
            "source_asset_id": asset.asset_id,
            "source_sha256": asset.sha256,
            "width": embedded.width,
            "height": embedded.height,
            "orientation": embedded.orientation,
            "embedding": embedded.how,
            "placement_mm": {"x": x_mm, "y": y_mm, "width": w_mm, "height": h_mm},
        }));
        previews.push((asset.asset_id, embedded.thumb.clone()));
    }
    doc.with_pages(pages);
    let mut warnings = Vec::new();
    let opts = PdfSaveOptions {
        optimize: false,
        subset_fonts: true,
        secure: true,
        image_optimization: None,
    };
    let mut lo = doc.to_lopdf_document(&opts, &mut warnings);
    hoist_nested_streams(&mut lo);
    lo.version = "1.4".to_string();
    let mut pdf = Vec::new();
    lo.save_to(&mut pdf)
        .map_err(|e| Error::tool("build_image_pdf", format!("cannot write the PDF: {e}")))?;

    let outputs = ws.join("outputs");
    store::ensure_dir(&outputs)?;
    let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string();
    let short = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let final_dir = outputs.join(format!("{stamp}-{short}"));
    let tmp = outputs.join(format!(".tmp-{short}"));
    let written = (|| -> Result<()> {
        store::atomic_write(&tmp.join("document.pdf"), &pdf)?;
        let manifest = json!({
            "title": title, "preset": preset, "page_size_mm": {"width": pw, "height": ph}, "margin_mm": MARGIN_MM,
            "created": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "pdf_sha256": format!("{:x}", Sha256::digest(&pdf)),
            "pages": manifest_pages,
        });
        store::write_json(&tmp.join("manifest.json"), &manifest)?;
        store::atomic_write(
            &tmp.join("preview.html"),
            preview_html(&title, &preset, &previews).as_bytes(),
        )?;
        std::fs::rename(&tmp, &final_dir).map_err(|e| Error::io(&final_dir, e))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    ctx.progress(total, Some(total), "done");
    let path = |n: &str| final_dir.join(n).display().to_string();
    Ok(json!({
        "stage": "ready",
        "output_directory": final_dir.display().to_string(),
        "file_path": path("document.pdf"),
        "manifest_path": path("manifest.json"),
        "preview_path": path("preview.html"),
        "title": title,
        "preset": preset,
        "pages": ids.iter().map(|i| json!({"source_asset_id": i})).collect::<Vec<_>>(),
    }))
}

/// Reads and embeds every page, on as many threads as there are cores (at most four), keeping
/// page order; reports progress as pages finish and stops early when cancelled.
fn prepare_pages(sources: &[(assets::Asset, PathBuf)], ctx: &CallContext) -> Result<Vec<Embedded>> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let total = sources.len();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Embedded>>>> =
        Mutex::new((0..total).map(|_| None).collect());
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(total.max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total || ctx.cancel_token().is_cancelled() {
                        break;
                    }
                    let path = &sources[i].1;
                    let r = std::fs::read(path)
                        .map_err(|e| Error::io(path, e))
                        .and_then(|b| embed(&b));
                    let failed = r.is_err();
                    results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
                    let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                    ctx.progress(
                        finished as u64,
                        Some(total as u64),
                        format!("page {finished} of {total}"),
                    );
                    if failed {
                        break;
                    }
                }
            });
        }
    });
    if ctx.cancel_token().is_cancelled() {
        return Err(Error::Cancelled);
    }
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    // A failure wins over pages left unprepared because the workers stopped at it.
    if let Some(pos) = results.iter().position(|r| matches!(r, Some(Err(_)))) {
        if let Some(Some(Err(e))) = results.into_iter().nth(pos) {
            return Err(e);
        }
        return Err(Error::tool("build_image_pdf", "a page failed"));
    }
    results
        .into_iter()
        .map(|r| {
            r.and_then(Result::ok)
                .ok_or_else(|| Error::tool("build_image_pdf", "a page was not prepared"))
        })
        .collect()
}

/// Moves streams nested in dictionaries (image masks) into objects of their own.
fn hoist_nested_streams(doc: &mut lopdf::Document) {
    let ids: Vec<lopdf::ObjectId> = doc.objects.keys().cloned().collect();
    for id in ids {
        let nested: Vec<(Vec<u8>, lopdf::Stream)> = match doc.objects.get(&id) {
            Some(lopdf::Object::Stream(s)) => s
                .dict
                .iter()
                .filter_map(|(k, v)| match v {
                    lopdf::Object::Stream(inner) => Some((k.clone(), inner.clone())),
                    _ => None,
                })
                .collect(),
            _ => continue,
        };
        for (key, inner) in nested {
            let new_id = doc.add_object(lopdf::Object::Stream(inner));
            if let Some(lopdf::Object::Stream(s)) = doc.objects.get_mut(&id) {
                s.dict.set(key, lopdf::Object::Reference(new_id));
            }
        }
    }
}

fn preview_html(title: &str, preset: &str, pages: &[(u64, Option<String>)]) -> String {
    let mut body = String::new();
    for (n, (asset, thumb)) in pages.iter().enumerate() {
        let img = thumb
            .as_ref()
            .map(|b| {
                format!(
                    "<img src=\"data:image/png;base64,{b}\" alt=\"page {}\">",
                    n + 1
                )
            })
            .unwrap_or_else(|| "<div class=\"missing\">no preview</div>".into());
        body.push_str(&format!(
            "<figure>{img}<figcaption>page {} · asset {asset}</figcaption></figure>\n",
            n + 1
        ));
    }
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>body{{font-family:sans-serif;margin:2em}}figure{{display:inline-block;margin:0 1em 1em 0;text-align:center}}img{{max-width:240px;max-height:240px;box-shadow:0 0 4px #888}}</style></head>\n<body><h1>{t}</h1><p>{n} page(s), {preset}</p>\n{body}</body></html>\n",
        t = html_escape(title),
        n = pages.len(),
        preset = html_escape(preset),
    )
}

/// Whether a path is inside a directory (for tests and checks).
pub fn within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// The folder where a workspace's builds go.
pub fn outputs_dir(host: &Host, workspace_id: &str) -> Result<PathBuf> {
    Ok(assets::workspace_dir(host, workspace_id)?.join("outputs"))
}

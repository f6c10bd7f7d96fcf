//! `build_image_pdf`: a workspace's images, in a given order, as one PDF — lossless.
//!
//! JPEGs a PDF reader can show are embedded byte for byte as `DCTDecode` streams (no decode and
//! re-encode); CMYK JPEGs written the Adobe way get the inverting `Decode` array. Every other
//! image (PNG of any depth, palette, GIF, WebP, TIFF, BMP, lossless JPEGs) is stored with Flate
//! at its own bit depth (16 bits stay 16 bits), alpha as an `SMask`; arithmetic-coded JPEGs are
//! re-coded with Huffman codes ([`arithmetic_jpeg`]) and embedded as JPEG. All of that is
//! prepared once, when the image is imported ([`prepare`]). EXIF orientation is honoured by the
//! placement matrix, so pixels are never rotated.
//!
//! The document is one writer's work: [`layout`] makes its few small objects (pages that each
//! name only the image they draw, content streams, catalog, a truthful info), and [`writer`]
//! writes them and copies each image in from a read-only map of its file, so a build's memory
//! does not grow with the document. The header says 1.4, or 1.5 when 16-bit images need it.
//! The result goes to a temporary folder renamed into place, so a failure never leaves half a
//! result.
//!
//! | file                 | its part                                                          |
//! |----------------------|-------------------------------------------------------------------|
//! | `mod.rs`             | the tool: spec, handler, page plan, [`layout`], the build         |
//! | `prepare.rs`         | an image made ready for pages once, when it is imported           |
//! | `arithmetic_jpeg.rs` | arithmetic-coded JPEGs re-coded with Huffman codes                |
//! | `huffman_jpeg.rs`    | Huffman-coded JPEGs checked to their last block; their DC picture |
//! | `flate.rs`           | lossless image streams: rows PNG-filtered, zlib-compressed        |
//! | `writer.rs`          | the PDF written object by object, image data streamed from disk   |
//! | `preview.rs`         | `preview.html`: title, page order and thumbnails, opened offline  |
//!
//! Why not printpdf: its `save` is lopdf's whole-document writer, which holds every image stream
//! in memory and serialises into one more buffer (three copies of a 60 MB document at once), and
//! its layout gives every page one shared resource list of all images and an info dictionary
//! that claims PDF/X. Using it for layout only would mean rewriting its output with a second
//! writer. The layout here is some 80 lines; lopdf remains for its object types (and in tests,
//! to read documents back).

pub mod arithmetic_jpeg;
pub mod flate;
pub mod huffman_jpeg;
pub mod prepare;
mod preview;
pub mod writer;

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lopdf::{Dictionary, Object, ObjectId, StringFormat};
use serde_json::{Value, json};
use sha2::Digest;

use crate::error::{Error, Result};
use crate::gate::CallContext;
use crate::host::Host;
use crate::registry::{Annotations, Effect, Handler, ToolSpec, handler};
use crate::store;
use crate::tools::{assets, jpeg};
use prepare::OnDisk;

/// Margin around each image, in millimetres.
pub const MARGIN_MM: f32 = 10.0;

/// The spec. Its input schema is closed: a build takes exactly these four arguments, all
/// required.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        "build_image_pdf",
        "Build a PDF from images",
        "Build one PDF from a workspace's images, one per page in the given order, fitted inside a \
         margin and centred (square 210×210 mm, portrait A4 or landscape A4). JPEGs are embedded \
         byte for byte; other images losslessly, with transparency. Writes document.pdf, \
         manifest.json and preview.html to a new output folder. A failed build is an error \
         whose result has stage `failed`, `retryable` and `error`.",
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
        let (host, args, ctx) = (inv.host(), inv.args, inv.ctx);
        let title = args["title"].as_str().unwrap_or("").to_string();
        let preset = args["preset"].as_str().unwrap_or("portrait").to_string();
        let result = tokio::task::spawn_blocking(move || build(&host, &args, &ctx))
            .await
            .map_err(|e| Error::tool("build_image_pdf", e.to_string()))?;
        match result {
            Ok(v) => Ok(v),
            Err(e) => {
                // Unknown assets and bad images will fail again; file-system trouble may not.
                let retryable = matches!(e, Error::Io { .. });
                // the tool's own failures are not named twice ("build_image_pdf failed: ...")
                let message = match e {
                    Error::Tool { message, .. } => message,
                    other => other.to_string(),
                };
                let result = json!({"stage": "failed", "title": title, "preset": preset, "pages": [], "retryable": retryable, "error": message});
                // a failure at every door (exit 1, isError, a Lua error), its result the output
                // schema's `failed` shape
                Err(Error::Reported {
                    tool: "build_image_pdf".to_string(),
                    message,
                    result: Box::new(result),
                })
            }
        }
    })
}

fn page_size(preset: &str) -> (f32, f32) {
    match preset {
        "square" => (210.0, 210.0),
        "landscape" => (297.0, 210.0),
        _ => (210.0, 297.0),
    }
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

/// How a page's image goes in.
enum Image {
    /// A JPEG embedded as it is: its header, file and length.
    Jpeg {
        info: jpeg::JpegInfo,
        path: PathBuf,
        len: u64,
    },
    /// Planes prepared at import (Flate data, or a re-coded JPEG).
    Prepared(OnDisk),
}

/// One page, planned: its asset, image and preview thumbnail.
struct Page {
    asset: assets::Asset,
    image: Image,
    thumb: Vec<u8>,
}

impl Page {
    fn size_and_orientation(&self) -> (u32, u32, u8) {
        match &self.image {
            Image::Jpeg { info, .. } => (info.width as u32, info.height as u32, info.orientation),
            Image::Prepared(p) => (p.header.width, p.header.height, p.header.orientation),
        }
    }

    fn embedding(&self) -> &'static str {
        match &self.image {
            Image::Jpeg { .. } => "jpeg-passthrough",
            Image::Prepared(p) if p.header.dct.is_some() => "jpeg-recoded",
            Image::Prepared(_) => "flate",
        }
    }
}

/// Enough of a JPEG's start to hold most headers; longer ones (large EXIF or ICC data) are read
/// whole.
const JPEG_HEADER_BYTES: u64 = 64 * 1024;

/// Plans one page from what is on disk; `None` when its prepared planes or thumbnail must be
/// made first. A missing or changed asset file is an error.
fn plan(assets_dir: &Path, asset: &assets::Asset) -> Result<Option<Page>> {
    let path = assets_dir.join(&asset.file);
    let len = std::fs::metadata(&path)
        .map_err(|e| Error::io(&path, e))?
        .len();
    if len != asset.bytes {
        return Err(Error::tool(
            "build_image_pdf",
            format!(
                "asset {}'s stored file is {len} bytes, not the {} it was imported with; import the image again",
                asset.asset_id, asset.bytes
            ),
        ));
    }
    let Ok(thumb) = std::fs::read(prepare::thumb_path(assets_dir, asset.asset_id)) else {
        return Ok(None);
    };
    if asset.media_type == "image/jpeg" {
        let mut head = Vec::new();
        File::open(&path)
            .and_then(|f| f.take(JPEG_HEADER_BYTES).read_to_end(&mut head))
            .map_err(|e| Error::io(&path, e))?;
        let info = prepare::passthrough_jpeg(&head).or_else(|| {
            // Headers longer than the first read: look at the whole file.
            (len > JPEG_HEADER_BYTES)
                .then(|| std::fs::read(&path).ok())
                .flatten()
                .and_then(|all| prepare::passthrough_jpeg(&all))
        });
        if let Some(info) = info {
            return Ok(Some(Page {
                asset: asset.clone(),
                image: Image::Jpeg { info, path, len },
                thumb,
            }));
        }
    }
    Ok(
        prepare::load(assets_dir, asset.asset_id, &asset.sha256).map(|on_disk| Page {
            asset: asset.clone(),
            image: Image::Prepared(on_disk),
            thumb,
        }),
    )
}

/// Makes the prepared planes and thumbnail of an asset again from its file.
fn remake(
    assets_dir: &Path,
    asset: &assets::Asset,
    budget: prepare::ImageBudget,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<()> {
    let path = assets_dir.join(&asset.file);
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let analysis = prepare::analyse(&bytes, &asset.sha256, budget, stop).map_err(|e| {
        Error::tool(
            "build_image_pdf",
            format!("asset {} does not decode: {e}", asset.asset_id),
        )
    })?;
    prepare::store(assets_dir, asset.asset_id, &analysis)
}

/// Plans every page, remaking what is missing on up to four threads, in page order.
fn plan_pages(
    assets_dir: &Path,
    sources: &[assets::Asset],
    budget: prepare::ImageBudget,
    ctx: &CallContext,
) -> Result<Vec<Page>> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut pages: Vec<Option<Page>> = Vec::with_capacity(sources.len());
    for a in sources {
        pages.push(plan(assets_dir, a)?);
    }
    let missing: Vec<usize> = (0..pages.len()).filter(|i| pages[*i].is_none()).collect();
    if !missing.is_empty() {
        let next = AtomicUsize::new(0);
        let failure: Mutex<Option<Error>> = Mutex::new(None);
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4)
            .min(missing.len());
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let stop = failure.lock().map_or(true, |f| f.is_some());
                        if k >= missing.len() || stop || ctx.cancel_token().is_cancelled() {
                            break;
                        }
                        let i = missing[k];
                        ctx.progress(
                            k as u64,
                            Some(missing.len() as u64),
                            format!("preparing page {} of {}", i + 1, sources.len()),
                        );
                        let stop = || ctx.cancel_token().is_cancelled() || ctx.timed_out();
                        if let Err(e) = remake(assets_dir, &sources[i], budget, &stop) {
                            let mut f = failure.lock().unwrap_or_else(|p| p.into_inner());
                            f.get_or_insert(e);
                        }
                    }
                });
            }
        });
        if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        if ctx.cancel_token().is_cancelled() {
            return Err(Error::Cancelled);
        }
        for i in missing {
            pages[i] = plan(assets_dir, &sources[i])?;
        }
    }
    pages
        .into_iter()
        .zip(sources)
        .map(|(p, a)| {
            p.ok_or_else(|| {
                Error::tool(
                    "build_image_pdf",
                    format!("asset {} could not be prepared", a.asset_id),
                )
            })
        })
        .collect()
}

/// Where a page's image goes, in millimetres from the bottom left, and its placement matrix.
struct Placed {
    x: f32,
    y: f32,
    w: f32,
    h: f32,
    matrix: [f32; 6],
}

fn place(page: &Page, pw: f32, ph: f32) -> Placed {
    let (width, height, orientation) = page.size_and_orientation();
    let (dw, dh) = if orientation >= 5 {
        (height as f32, width as f32)
    } else {
        (width as f32, height as f32)
    };
    let (bw, bh) = (pw - 2.0 * MARGIN_MM, ph - 2.0 * MARGIN_MM);
    let scale = (bw / dw).min(bh / dh);
    let (w, h) = (dw * scale, dh * scale);
    let (x, y) = ((pw - w) / 2.0, (ph - h) / 2.0);
    let matrix = placement(
        orientation,
        mm_to_pt(x),
        mm_to_pt(y),
        mm_to_pt(w),
        mm_to_pt(h),
    );
    Placed { x, y, w, h, matrix }
}

/// The document's small objects — catalog, page tree, pages, their content streams, info —
/// and for each page the object id its image is written under (by [`write_image`], streamed
/// from disk).
struct Layout {
    objects: Vec<(ObjectId, Object)>,
    images: Vec<ObjectId>,
    trailer: Dictionary,
    max_id: u32,
}

/// Lays the pages out: each page draws its one image, named in its own resources, through the
/// placement matrix. The info says what the file is and no more (title, producer, dates).
fn layout(title: &str, placed: &[Placed], pw: f32, ph: f32) -> Layout {
    let (catalog, tree, info) = ((1, 0), (2, 0), (3, 0));
    // per page: the page, its content stream and its image
    let ids = |n: usize| {
        let first = 4 + 3 * n as u32;
        ((first, 0), (first + 1, 0), (first + 2, 0))
    };
    let mut objects = Vec::with_capacity(3 + 2 * placed.len());
    let mut kids = Vec::with_capacity(placed.len());
    let mut images = Vec::with_capacity(placed.len());
    let media_box = vec![0.into(), 0.into(), mm_to_pt(pw).into(), mm_to_pt(ph).into()];
    for (n, p) in placed.iter().enumerate() {
        let (page, content, image) = ids(n);
        let m = p.matrix.map(|v| {
            format!("{v:.4}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string()
        });
        let ops = format!("q {} cm /Im{n} Do Q", m.join(" "));
        let xobjects = Dictionary::from_iter(vec![(format!("Im{n}"), Object::Reference(image))]);
        let page_dict = Dictionary::from_iter(vec![
            ("Type", name("Page")),
            ("Parent", Object::Reference(tree)),
            ("MediaBox", Object::Array(media_box.clone())),
            (
                "Resources",
                Object::Dictionary(Dictionary::from_iter(vec![(
                    "XObject",
                    Object::Dictionary(xobjects),
                )])),
            ),
            ("Contents", Object::Reference(content)),
        ]);
        objects.push((page, Object::Dictionary(page_dict)));
        objects.push((
            content,
            Object::Stream(lopdf::Stream::new(Dictionary::new(), ops.into_bytes())),
        ));
        kids.push(Object::Reference(page));
        images.push(image);
    }
    objects.push((
        tree,
        Object::Dictionary(Dictionary::from_iter(vec![
            ("Type", name("Pages")),
            ("Count", Object::Integer(placed.len() as i64)),
            ("Kids", Object::Array(kids)),
        ])),
    ));
    objects.push((
        catalog,
        Object::Dictionary(Dictionary::from_iter(vec![
            ("Type", name("Catalog")),
            ("Pages", Object::Reference(tree)),
        ])),
    ));
    let now = chrono::Utc::now().format("D:%Y%m%d%H%M%SZ").to_string();
    let date = || Object::String(now.clone().into_bytes(), StringFormat::Literal);
    let producer = format!("lmcp {}", env!("CARGO_PKG_VERSION"));
    objects.push((
        info,
        Object::Dictionary(Dictionary::from_iter(vec![
            ("Title", text_string(title)),
            ("Producer", text_string(&producer)),
            ("CreationDate", date()),
            ("ModDate", date()),
        ])),
    ));
    // a file identifier, as readers and PDF/A checkers expect: the same twice for a new file
    let digest = sha2::Sha256::digest(format!("{title}\n{now}\n{}", placed.len()));
    let id = Object::String(digest[..16].to_vec(), StringFormat::Hexadecimal);
    let trailer = Dictionary::from_iter(vec![
        ("Root", Object::Reference(catalog)),
        ("Info", Object::Reference(info)),
        ("ID", Object::Array(vec![id.clone(), id])),
    ]);
    Layout {
        objects,
        images,
        trailer,
        max_id: ids(placed.len()).0.0 - 1,
    }
}

/// A PDF text string: as it is when it is printable ASCII, else UTF-16BE with its byte order
/// mark (ISO 32000-1 §7.9.2.2), which every reader takes.
fn text_string(text: &str) -> Object {
    if text.bytes().all(|b| (0x20..0x7F).contains(&b)) {
        return Object::String(text.as_bytes().to_vec(), StringFormat::Literal);
    }
    let mut bytes = vec![0xFE, 0xFF];
    bytes.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
    Object::String(bytes, StringFormat::Hexadecimal)
}

/// The PDF version the document's features need: 1.5 for 16-bit images, else 1.4 (soft masks).
fn pdf_version(pages: &[Page]) -> &'static str {
    let sixteen = pages.iter().any(|p| match &p.image {
        Image::Prepared(d) => {
            d.header.color.bits > 8 || d.header.mask.as_ref().is_some_and(|m| m.bits > 8)
        }
        Image::Jpeg { .. } => false,
    });
    if sixteen { "1.5" } else { "1.4" }
}

fn name(s: &str) -> Object {
    Object::Name(s.as_bytes().to_vec())
}

fn image_dict(width: u32, height: u32, color_space: &str, bits: u8, filter: &str) -> Dictionary {
    Dictionary::from_iter(vec![
        ("Type", name("XObject")),
        ("Subtype", name("Image")),
        ("Width", Object::Integer(width as i64)),
        ("Height", Object::Integer(height as i64)),
        ("ColorSpace", name(color_space)),
        ("BitsPerComponent", Object::Integer(bits as i64)),
        ("Filter", name(filter)),
    ])
}

/// A JPEG image's dictionary; Adobe-inverted CMYK gets the `Decode` array that undoes it.
fn dct_dict(width: u32, height: u32, components: u8, inverted_cmyk: bool) -> Dictionary {
    let space = match components {
        1 => "DeviceGray",
        4 => "DeviceCMYK",
        _ => "DeviceRGB",
    };
    let mut d = image_dict(width, height, space, 8, "DCTDecode");
    if inverted_cmyk {
        d.set(
            "Decode",
            Object::Array([1, 0, 1, 0, 1, 0, 1, 0].map(Object::Integer).to_vec()),
        );
    }
    d
}

fn flate_dict(plane: &flate::Plane, color_space: &str) -> Dictionary {
    let mut d = image_dict(
        plane.width,
        plane.height,
        color_space,
        plane.bits,
        "FlateDecode",
    );
    d.set(
        "DecodeParms",
        Object::Dictionary(Dictionary::from_iter(vec![
            ("Predictor", Object::Integer(15)),
            ("Colors", Object::Integer(plane.colors as i64)),
            ("BitsPerComponent", Object::Integer(plane.bits as i64)),
            ("Columns", Object::Integer(plane.width as i64)),
        ])),
    );
    d
}

/// A file's bytes `at..at + len`, mapped read-only, for copying into the PDF.
///
/// Mapping skips the copy a `read` makes (into a buffer, then out again): a JPEG build spends
/// most of its time moving bytes, and this made it about 15% faster. The files mapped are lmcp's
/// own workspace files, which it only ever replaces by renaming a new file over them, so a
/// mapped file never changes under the map; only another program truncating one in place
/// during a build could make a read through the map fail.
struct Mapped {
    map: memmap2::Mmap,
    at: usize,
    len: usize,
}

impl Mapped {
    fn open(path: &Path, at: u64, len: u64) -> std::io::Result<Mapped> {
        let file = File::open(path)?;
        let size = file.metadata()?.len();
        if size < at + len || len == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the file is {size} bytes, short of the {} expected; it changed after it was checked",
                    at + len
                ),
            ));
        }
        // SAFETY: read-only map of a file lmcp replaces only by rename (see above).
        let map = unsafe { memmap2::MmapOptions::new().populate().map(&file)? };
        Ok(Mapped {
            map,
            at: at as usize,
            len: len as usize,
        })
    }

    fn bytes(&self) -> &[u8] {
        &self.map[self.at..self.at + self.len]
    }

    /// Writes the bytes in 1 MiB pieces (each hashed while still in cache, then written).
    fn write_to(&self, out: &mut dyn Write) -> std::io::Result<()> {
        self.bytes()
            .chunks(1 << 20)
            .try_for_each(|c| out.write_all(c))
    }
}

/// Writes an image object (and its soft mask) for a page.
fn write_image<W: Write>(
    w: &mut writer::PdfWriter<W>,
    id: ObjectId,
    page: &Page,
) -> std::io::Result<()> {
    match &page.image {
        Image::Jpeg { info, path, len } => {
            let d = dct_dict(
                info.width as u32,
                info.height as u32,
                info.components,
                info.inverted_cmyk(),
            );
            // checked against the asset's SHA-256 beside the writing (see `verify_jpegs`)
            let data = Mapped::open(path, 0, *len)?;
            w.stream(id, d, *len, |out| data.write_to(out))
        }
        Image::Prepared(on_disk) if on_disk.header.dct.is_some() => {
            let h = &on_disk.header;
            let inverted = h.dct.is_some_and(|d| d.inverted_cmyk);
            let d = dct_dict(h.width, h.height, h.color.colors, inverted);
            let data = Mapped::open(&on_disk.path, on_disk.data_at, h.color.len)?;
            w.stream(id, d, h.color.len, |out| data.write_to(out))
        }
        Image::Prepared(on_disk) => {
            let h = &on_disk.header;
            let mut d = flate_dict(&h.color, h.color.color_space());
            let mask_id = h.mask.as_ref().map(|_| (w.new_id(), 0));
            if let Some(m) = mask_id {
                d.set("SMask", Object::Reference(m));
            }
            let color = Mapped::open(&on_disk.path, on_disk.data_at, h.color.len)?;
            w.stream(id, d, h.color.len, |out| color.write_to(out))?;
            if let (Some(mid), Some(mask)) = (mask_id, &h.mask) {
                let alpha = Mapped::open(&on_disk.path, on_disk.data_at + h.color.len, mask.len)?;
                w.stream(mid, flate_dict(mask, "DeviceGray"), mask.len, |out| {
                    alpha.write_to(out)
                })?;
            }
            Ok(())
        }
    }
}

/// The JPEGs a PDF embeds byte for byte must be the very files imported: a file changed behind
/// lmcp's back (same size, other bytes) is refused, not embedded. Each is hashed from the same
/// shared map of its file that the writer copies from.
fn verify_jpegs(pages: &[Page]) -> Result<()> {
    for page in pages {
        if let Image::Jpeg { path, len, .. } = &page.image {
            let data = Mapped::open(path, 0, *len).map_err(|e| Error::io(path, e))?;
            let sha = format!("{:x}", sha2::Sha256::digest(data.bytes()));
            if sha != page.asset.sha256 {
                let changed = std::io::Error::other(format!(
                    "asset {} changed since it was imported (its SHA-256 differs); import the \
                     image again",
                    page.asset.asset_id
                ));
                return Err(Error::io(path, changed));
            }
        }
    }
    Ok(())
}

/// Writes the document: the layout's objects, then each page's image as it is copied in. The
/// embedded JPEGs are checked ([`verify_jpegs`]) on a thread of their own meanwhile: the build
/// hashed every JPEG twice (once to check it, once into the document's own SHA-256), one after
/// the other, and the check was a third of its time (#39). A document some JPEG of which fails
/// the check is an error, and the caller removes it: it is never put in place.
fn write_pdf(
    path: &Path,
    lo: &Layout,
    pages: &[Page],
    ctx: &CallContext,
) -> Result<writer::Written<File>> {
    std::thread::scope(|scope| {
        let verifying = scope.spawn(|| verify_jpegs(pages));
        let written = write_pages(path, lo, pages, ctx);
        let verified = verifying.join().unwrap_or_else(|_| {
            Err(Error::tool(
                "build_image_pdf",
                "the thread checking the JPEGs failed",
            ))
        });
        match (written, verified) {
            (Err(Error::Cancelled), _) => Err(Error::Cancelled),
            (_, Err(e)) => Err(e),
            (written, Ok(())) => written,
        }
    })
}

/// [`write_pdf`]'s writing.
fn write_pages(
    path: &Path,
    lo: &Layout,
    pages: &[Page],
    ctx: &CallContext,
) -> Result<writer::Written<File>> {
    let io = |e: std::io::Error| Error::io(path, e);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io)?;
    // Small objects are gathered; image data (written in pieces of 64 KiB or more) goes past the
    // buffer straight to the file, never copied into it.
    let version = pdf_version(pages);
    let mut w =
        writer::PdfWriter::new(BufWriter::with_capacity(64 << 10, file), version, lo.max_id)
            .map_err(io)?;
    for (id, object) in &lo.objects {
        w.object(*id, object).map_err(io)?;
    }
    let total = pages.len() as u64;
    for (n, (page, id)) in pages.iter().zip(&lo.images).enumerate() {
        if ctx.cancel_token().is_cancelled() {
            return Err(Error::Cancelled);
        }
        write_image(&mut w, *id, page).map_err(|e| match &page.image {
            Image::Jpeg { path, .. } => Error::io(path, e),
            Image::Prepared(d) => Error::io(&d.path, e),
        })?;
        // Let the disk start on this page while the next is copied: the final sync then has
        // little left to wait for.
        let sink = w.get_mut();
        sink.flush().map_err(io)?;
        start_writeback(sink.get_ref());
        // One step per page, and a last one for the sync and the manifest ("done"): progress
        // values only ever increase, as MCP asks.
        ctx.progress(
            n as u64 + 1,
            Some(total + 1),
            format!("page {} of {total}", n + 1),
        );
    }
    let done = w.finish(lo.trailer.clone()).map_err(io)?;
    // Not synced here: the caller syncs it together with the manifest and preview.
    let file = done.inner.into_inner().map_err(|e| io(e.into_error()))?;
    Ok(writer::Written {
        inner: file,
        sha256: done.sha256,
        bytes: done.bytes,
    })
}

/// Asks the kernel to start writing a file's dirty pages out, without waiting (Linux only; a
/// hint, so failures are ignored — the final sync is what guarantees durability).
fn start_writeback(file: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: sync_file_range only reads the descriptor, which `file` keeps open.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// Creates a new file (never replacing one) with these bytes; not yet synced.
fn write_new(path: &Path, bytes: &[u8]) -> Result<File> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    f.write_all(bytes).map_err(|e| Error::io(path, e))?;
    Ok(f)
}

/// Syncs files to disk on a thread each; the first failure wins.
fn sync_all_at_once(files: &[(&Path, &File)]) -> Result<()> {
    std::thread::scope(|scope| {
        let running: Vec<_> = files
            .iter()
            .map(|(path, file)| {
                scope.spawn(move || file.sync_all().map_err(|e| Error::io(path, e)))
            })
            .collect();
        running
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::tool("build_image_pdf", "a sync thread failed")))
            })
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    })
}

/// A length for the manifest, to 0.01 mm: the layout's `f32`s shown as they are read
/// (`21.83`), not as their binary value widened to `f64` (`21.833335876464844`) (#34).
fn mm(x: f32) -> f64 {
    (f64::from(x) * 100.0).round() / 100.0
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
    let assets_dir = ws.join("assets");
    // Every asset must exist before any work starts.
    let all = assets::assets(host, id)?;
    let sources = ids
        .iter()
        .map(|asset_id| {
            all.iter()
                .find(|a| a.asset_id == *asset_id)
                .cloned()
                .ok_or_else(|| Error::Refused(format!("workspace `{id}` has no asset {asset_id}")))
        })
        .collect::<Result<Vec<_>>>()?;
    // remade planes decode within the same budget an import does
    let budget = prepare::ImageBudget::from_limits(&host.config().limits);
    let pages = plan_pages(&assets_dir, &sources, budget, ctx)?;
    let (pw, ph) = page_size(&preset);
    let placed: Vec<Placed> = pages.iter().map(|p| place(p, pw, ph)).collect();
    let lo = layout(&title, &placed, pw, ph);

    let outputs = ws.join("outputs");
    store::ensure_dir(&outputs)?;
    let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string();
    let short = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let final_dir = outputs.join(format!("{stamp}-{short}"));
    let tmp = outputs.join(format!(".tmp-{short}"));
    let written = (|| -> Result<()> {
        store::ensure_dir(&tmp)?;
        let pdf = write_pdf(&tmp.join("document.pdf"), &lo, &pages, ctx)?;
        let manifest_pages: Vec<Value> = pages
            .iter()
            .zip(&placed)
            .map(|(page, at)| {
                let (width, height, orientation) = page.size_and_orientation();
                json!({
                    "source_asset_id": page.asset.asset_id,
                    "source_file": page.asset.source_name,
                    "source_sha256": page.asset.sha256,
                    "width": width,
                    "height": height,
                    "orientation": orientation,
                    "embedding": page.embedding(),
                    "placement_mm": {"x": mm(at.x), "y": mm(at.y), "width": mm(at.w), "height": mm(at.h)},
                })
            })
            .collect();
        let manifest = json!({
            "title": title, "preset": preset, "page_size_mm": {"width": mm(pw), "height": mm(ph)}, "margin_mm": mm(MARGIN_MM),
            "created": store::timestamp(),
            "pdf_sha256": pdf.sha256,
            "pdf_bytes": pdf.bytes,
            "pages": manifest_pages,
        });
        let mut manifest_text = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::tool("build_image_pdf", e.to_string()))?;
        manifest_text.push(b'\n');
        let manifest_file = write_new(&tmp.join("manifest.json"), &manifest_text)?;
        let thumbs: Vec<(u64, &[u8])> = pages
            .iter()
            .map(|p| (p.asset.asset_id, p.thumb.as_slice()))
            .collect();
        let html = preview::html(&title, &preset, &thumbs);
        let preview_file = write_new(&tmp.join("preview.html"), html.as_bytes())?;
        // The folder is renamed into place only once everything in it is on disk; the three
        // files (and the folder's entries) are synced side by side, so their waits overlap.
        let tmp_dir = File::open(&tmp).map_err(|e| Error::io(&tmp, e))?;
        sync_all_at_once(&[
            (&tmp.join("document.pdf"), &pdf.inner),
            (&tmp.join("manifest.json"), &manifest_file),
            (&tmp.join("preview.html"), &preview_file),
        ])?;
        tmp_dir.sync_all().map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &final_dir).map_err(|e| Error::io(&final_dir, e))?;
        if let Ok(d) = File::open(&outputs) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let steps = pages.len() as u64 + 1;
    ctx.progress(steps, Some(steps), "done");
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

/// The folder where a workspace's builds go.
pub fn outputs_dir(host: &Host, workspace_id: &str) -> Result<PathBuf> {
    Ok(assets::workspace_dir(host, workspace_id)?.join("outputs"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_pdf_text_strings() {
        assert_eq!(
            text_string("Trip (2026)"),
            Object::String(b"Trip (2026)".to_vec(), StringFormat::Literal)
        );
        let Object::String(bytes, StringFormat::Hexadecimal) = text_string("Été à Kyōto")
        else {
            panic!("not a hex string");
        };
        assert_eq!(&bytes[..2], [0xFE, 0xFF]);
        let units: Vec<u16> = bytes[2..]
            .chunks(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(String::from_utf16(&units).unwrap(), "Été à Kyōto");
    }

    #[test]
    fn each_page_draws_its_own_image_through_its_placement() {
        let placed: Vec<Placed> = (0..3)
            .map(|n| Placed {
                x: 10.0,
                y: 10.0,
                w: 100.0,
                h: 50.0,
                matrix: [283.46, 0.0, 0.0, 141.73, 28.35 + n as f32, 28.35],
            })
            .collect();
        let lo = layout("T", &placed, 210.0, 297.0);
        assert_eq!(lo.images.len(), 3);
        let objects: std::collections::BTreeMap<ObjectId, &Object> =
            lo.objects.iter().map(|(id, o)| (*id, o)).collect();
        assert_eq!(objects.len(), lo.objects.len(), "ids are unique");
        assert!(lo.images.iter().all(|id| !objects.contains_key(id)));
        assert!(lo.images.iter().all(|id| id.0 <= lo.max_id));
        for (n, image) in lo.images.iter().enumerate() {
            let page = objects
                .values()
                .filter_map(|o| o.as_dict().ok())
                .find(|d| {
                    d.get_deref(b"Resources", &lopdf::Document::new())
                        .ok()
                        .and_then(|r| r.as_dict().ok()?.get(b"XObject").ok()?.as_dict().ok())
                        .is_some_and(|x| {
                            x.get(format!("Im{n}").as_bytes()).ok()
                                == Some(&Object::Reference(*image))
                        })
                })
                .unwrap_or_else(|| panic!("no page draws image {n}"));
            let content = page.get(b"Contents").unwrap().as_reference().unwrap();
            let ops =
                String::from_utf8(objects[&content].as_stream().unwrap().content.clone()).unwrap();
            assert_eq!(
                ops,
                format!(
                    "q 283.46 0 0 141.73 {} 28.35 cm /Im{n} Do Q",
                    28.35 + n as f32
                )
            );
        }
    }
}

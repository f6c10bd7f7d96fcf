//! build_image_pdf: pages, sizes, JPEG pass-through byte for byte, SMask for alpha, CMYK decode,
//! EXIF orientation, the manifest, bad inputs, and pages rendered back (hayro; with the `interop`
//! feature also poppler's pdftoppm, and the two must agree). `tests/interop` includes this
//! module too, so `.ci/run`'s interop step runs it with the feature.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{self, TestHost, call_yes};

/// Builds what must fail: the error is a tool failure (exit 1) whose details are SPEC §6's
/// `stage: failed` result, returned here.
async fn failed_build(t: &TestHost, args: Value) -> Value {
    let ctx = common::confirmed(lmcp::Origin::Cli);
    let e = t
        .host
        .call(lmcp::CallRequest::new("build_image_pdf", args, ctx))
        .await
        .into_result()
        .expect_err("the build must fail");
    assert_eq!((e.class(), e.exit_code()), ("tool_error", 1), "{e}");
    let r = e.details().expect("the failed result");
    assert_eq!(r["stage"], "failed", "{r}");
    assert_eq!(
        r["error"].as_str(),
        Some(e.to_string().trim_start_matches("build_image_pdf failed: ")),
        "{r}"
    );
    r
}

fn jpeg_bytes(img: &image::RgbImage) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
    out.into_inner()
}

/// A JPEG with an EXIF orientation segment inserted after SOI.
fn with_orientation(jpeg: &[u8], o: u16) -> Vec<u8> {
    let mut tiff = b"MM\0\x2a\0\0\0\x08\0\x01".to_vec();
    tiff.extend_from_slice(&[0x01, 0x12, 0, 3, 0, 0, 0, 1]);
    tiff.extend_from_slice(&o.to_be_bytes());
    tiff.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    let mut seg = vec![0xFF, 0xE1];
    seg.extend_from_slice(&((2 + 6 + tiff.len()) as u16).to_be_bytes());
    seg.extend_from_slice(b"Exif\0\0");
    seg.extend_from_slice(&tiff);
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(&seg);
    out.extend_from_slice(&jpeg[2..]);
    out
}

struct Fixture {
    t: TestHost,
    ws: String,
    dir: PathBuf,
}

async fn fixture(files: &[(&str, Vec<u8>)]) -> Fixture {
    let t = TestHost::new();
    let dir = t.home().join("data/workspace");
    std::fs::create_dir_all(&dir).unwrap();
    let ws = call_yes(&t.host, "workspace_create", json!({"name": "album"}))
        .await
        .unwrap()["workspace_id"]
        .as_str()
        .unwrap()
        .to_string();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
        call_yes(
            &t.host,
            "asset_import",
            json!({"workspace_id": ws, "path": name}),
        )
        .await
        .unwrap();
    }
    Fixture { t, ws, dir }
}

fn stream_of(doc: &lopdf::Document, page_id: lopdf::ObjectId) -> &lopdf::Stream {
    let page = doc.get_dictionary(page_id).unwrap();
    let resources = page.get(b"Resources").unwrap();
    let resources = match resources {
        lopdf::Object::Reference(r) => doc.get_dictionary(*r).unwrap(),
        lopdf::Object::Dictionary(d) => d,
        _ => panic!("no resources"),
    };
    let xobjects = match resources.get(b"XObject").unwrap() {
        lopdf::Object::Reference(r) => doc.get_dictionary(*r).unwrap(),
        lopdf::Object::Dictionary(d) => d,
        _ => panic!("no xobjects"),
    };
    // The page's content draws exactly one XObject: that image.
    let content = lopdf::content::Content::decode(&doc.get_page_content(page_id)).unwrap();
    let drawn: Vec<Vec<u8>> = content
        .operations
        .iter()
        .filter(|op| op.operator == "Do")
        .map(|op| op.operands[0].as_name().unwrap().to_vec())
        .collect();
    assert_eq!(drawn.len(), 1, "one image per page");
    let r = xobjects.get(&drawn[0]).unwrap();
    doc.get_object(r.as_reference().unwrap())
        .unwrap()
        .as_stream()
        .unwrap()
}

fn media_box(doc: &lopdf::Document, page: lopdf::ObjectId) -> (f32, f32) {
    let b = doc
        .get_dictionary(page)
        .unwrap()
        .get(b"MediaBox")
        .unwrap()
        .as_array()
        .unwrap()
        .clone();
    let n = |o: &lopdf::Object| {
        o.as_float()
            .or_else(|_| o.as_i64().map(|v| v as f32))
            .unwrap()
    };
    (n(&b[2]) - n(&b[0]), n(&b[3]) - n(&b[1]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jpeg_passthrough_png_alpha_and_presets() {
    let photo = image::RgbImage::from_fn(64, 48, |x, y| {
        image::Rgb([(x * 4) as u8, (y * 5) as u8, 120])
    });
    let jpeg = jpeg_bytes(&photo);
    let mut png = std::io::Cursor::new(Vec::new());
    image::RgbaImage::from_fn(40, 30, |x, _| {
        image::Rgba([200, 10, 10, if x < 20 { 255 } else { 60 }])
    })
    .write_to(&mut png, image::ImageFormat::Png)
    .unwrap();
    let mut png16 = std::io::Cursor::new(Vec::new());
    image::ImageBuffer::<image::Rgba<u16>, _>::from_fn(10, 10, |x, _| {
        image::Rgba([x as u16 * 6000, 0, 65535, 30000])
    })
    .write_to(&mut png16, image::ImageFormat::Png)
    .unwrap();
    let f = fixture(&[
        ("p.jpg", jpeg.clone()),
        ("a.png", png.into_inner()),
        ("deep.png", png16.into_inner()),
    ])
    .await;
    for (preset, size) in [
        ("square", (595.3, 595.3)),
        ("portrait", (595.3, 841.9)),
        ("landscape", (841.9, 595.3)),
    ] {
        let r = call_yes(&f.t.host, "build_image_pdf", json!({"workspace_id": f.ws, "source_asset_ids": [2, 1, 3], "title": "Trip", "preset": preset})).await.unwrap();
        assert_eq!(r["stage"], "ready", "{r}");
        assert_eq!(
            r["pages"],
            json!([{"source_asset_id": 2}, {"source_asset_id": 1}, {"source_asset_id": 3}])
        );
        let pdf = std::fs::read(r["file_path"].as_str().unwrap()).unwrap();
        assert!(pdf.starts_with(b"%PDF-1.5"), "a 16-bit image needs 1.5");
        let doc = lopdf::Document::load_mem(&pdf).unwrap();
        let pages = doc.get_pages();
        assert_eq!(pages.len(), 3);
        // every page's resources name only the image it draws
        for id in pages.values() {
            let page = doc.get_dictionary(*id).unwrap();
            let resources = page.get(b"Resources").unwrap().as_dict().unwrap();
            let images = resources.get(b"XObject").unwrap().as_dict().unwrap();
            assert_eq!(images.len(), 1, "page {id:?} lists {} images", images.len());
        }
        // the info is the document's: title and producer, no PDF/X claim
        let info = doc.trailer.get(b"Info").unwrap().as_reference().unwrap();
        let info = doc.get_dictionary(info).unwrap();
        assert!(info.get(b"GTS_PDFXVersion").is_err(), "no PDF/X claim");
        assert!(info.get(b"Title").is_ok() && info.get(b"Producer").is_ok());
        assert!(info.get(b"CreationDate").is_ok());
        let ids: Vec<lopdf::ObjectId> = pages.values().cloned().collect();
        let (w, h) = media_box(&doc, ids[0]);
        assert!(
            (w - size.0).abs() < 1.0 && (h - size.1).abs() < 1.0,
            "{preset}: {w}x{h}"
        );
        if preset == "square" {
            // without the 16-bit image, 1.4 is enough (soft masks)
            let r = call_yes(&f.t.host, "build_image_pdf", json!({"workspace_id": f.ws, "source_asset_ids": [2, 1], "title": "Trip", "preset": preset})).await.unwrap();
            let head = std::fs::read(r["file_path"].as_str().unwrap()).unwrap();
            assert!(head.starts_with(b"%PDF-1.4"), "SMask needs 1.4");
        }
        // page 2 is the JPEG: DCTDecode, the bytes exactly the source file's
        let jpeg_stream = stream_of(&doc, ids[1]);
        assert_eq!(name_in(jpeg_stream, "Filter"), b"DCTDecode");
        assert_eq!(jpeg_stream.content, jpeg, "JPEG embedded byte for byte");
        // page 1 is the PNG with alpha: Flate, and an SMask object
        let png_stream = stream_of(&doc, ids[0]);
        assert_eq!(name_in(png_stream, "Filter"), b"FlateDecode");
        let mask = png_stream
            .dict
            .get(b"SMask")
            .unwrap()
            .as_reference()
            .expect("the mask is an object of its own");
        assert_eq!(
            doc.get_object(mask)
                .unwrap()
                .as_stream()
                .unwrap()
                .dict
                .get(b"ColorSpace")
                .unwrap()
                .as_name()
                .unwrap(),
            b"DeviceGray"
        );
        // page 3 keeps 16 bits, alpha included
        let deep = stream_of(&doc, ids[2]);
        assert_eq!(
            deep.dict
                .get(b"BitsPerComponent")
                .unwrap()
                .as_i64()
                .unwrap(),
            16
        );
        let deep_mask = doc
            .get_object(deep.dict.get(b"SMask").unwrap().as_reference().unwrap())
            .unwrap()
            .as_stream()
            .unwrap();
        assert_eq!(
            deep_mask
                .dict
                .get(b"BitsPerComponent")
                .unwrap()
                .as_i64()
                .unwrap(),
            16
        );
        // the info dictionary has real dates and the title
        let info = doc
            .trailer
            .get(b"Info")
            .and_then(|i| i.as_reference())
            .map(|r| doc.get_dictionary(r).unwrap().clone())
            .unwrap();
        let date = String::from_utf8_lossy(info.get(b"CreationDate").unwrap().as_str().unwrap())
            .to_string();
        assert!(date.starts_with("D:20"), "{date}");
        // the manifest matches
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(r["manifest_path"].as_str().unwrap()).unwrap(),
        )
        .unwrap();
        assert_eq!(manifest["title"], "Trip");
        assert_eq!(manifest["pages"][1]["embedding"], "jpeg-passthrough");
        assert_eq!(manifest["pages"][0]["source_asset_id"], 2);
        let sha = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(&pdf));
        assert_eq!(manifest["pdf_sha256"], json!(sha));
        let preview = std::fs::read_to_string(r["preview_path"].as_str().unwrap()).unwrap();
        assert!(
            preview.contains("<h1>Trip</h1>") && preview.contains("data:image/png;base64,"),
            "self-contained preview"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orientation_swaps_the_placed_size() {
    let photo = image::RgbImage::from_fn(80, 40, |x, _| image::Rgb([x as u8 * 3, 0, 0]));
    let plain = jpeg_bytes(&photo);
    let files: Vec<(String, Vec<u8>)> = (1..=8u16)
        .map(|o| (format!("o{o}.jpg"), with_orientation(&plain, o)))
        .chain(std::iter::once((
            "o0.jpg".to_string(),
            with_orientation(&plain, 0),
        )))
        .collect();
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let f = fixture(&refs).await;
    let r = call_yes(&f.t.host, "build_image_pdf", json!({"workspace_id": f.ws, "source_asset_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9], "title": "o", "preset": "square"})).await.unwrap();
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(r["manifest_path"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    for (i, p) in manifest["pages"].as_array().unwrap().iter().enumerate() {
        let o = p["orientation"].as_u64().unwrap();
        let expected = if i == 8 { 1 } else { i as u64 + 1 };
        assert_eq!(o, expected, "page {i}");
        let (w, h) = (
            p["placement_mm"]["width"].as_f64().unwrap(),
            p["placement_mm"]["height"].as_f64().unwrap(),
        );
        if o >= 5 {
            assert!(h > w, "orientation {o} stands the wide image up: {w}x{h}");
        } else {
            assert!(w > h, "orientation {o} keeps it wide: {w}x{h}");
        }
    }
    // the matrices map the unit square onto the box, mirrored or turned as EXIF says
    use lmcp::tools::pdf::placement;
    assert_eq!(
        placement(1, 10.0, 20.0, 100.0, 50.0),
        [100.0, 0.0, 0.0, 50.0, 10.0, 20.0]
    );
    assert_eq!(
        placement(6, 0.0, 0.0, 50.0, 100.0),
        [0.0, -100.0, 50.0, 0.0, 0.0, 100.0]
    );
    assert_eq!(
        placement(2, 0.0, 0.0, 10.0, 10.0),
        [-10.0, 0.0, 0.0, 10.0, 10.0, 0.0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_give_the_documented_errors() {
    let photo = image::RgbImage::from_pixel(8, 8, image::Rgb([1, 2, 3]));
    let f = fixture(&[("x.jpg", jpeg_bytes(&photo))]).await;
    let ok =
        json!({"workspace_id": f.ws, "source_asset_ids": [1], "title": "t", "preset": "square"});
    let mut cases = vec![];
    let mut many = ok.clone();
    many["source_asset_ids"] = json!((1..=21).collect::<Vec<u64>>());
    cases.push((many, "/source_asset_ids"));
    let mut empty = ok.clone();
    empty["title"] = json!("");
    cases.push((empty, "/title"));
    let mut preset = ok.clone();
    preset["preset"] = json!("poster");
    cases.push((preset, "/preset"));
    let mut extra = ok.clone();
    extra["dpi"] = json!(300);
    cases.push((extra, "additionalProperties"));
    let mut zero = ok.clone();
    zero["source_asset_ids"] = json!([0]);
    cases.push((zero, "/source_asset_ids/0"));
    for (args, expect) in cases {
        let e = call_yes(&f.t.host, "build_image_pdf", args)
            .await
            .unwrap_err();
        assert!(e.contains("invalid arguments") && e.contains(expect), "{e}");
    }
    // an unknown asset: failed, not retryable
    let mut unknown = ok.clone();
    unknown["source_asset_ids"] = json!([1, 7]);
    let r = failed_build(&f.t, unknown).await;
    assert_eq!(
        (
            r["stage"].as_str().unwrap(),
            r["retryable"].as_bool().unwrap()
        ),
        ("failed", false),
        "{r}"
    );
    assert!(r["error"].as_str().unwrap().contains("no asset 7"));
    // a stored file deleted behind our back: failed, retryable (an I/O failure)
    let (_, stored) = lmcp::tools::assets::asset(&f.t.host, &f.ws, 1).unwrap();
    std::fs::remove_file(&stored).unwrap();
    let r = failed_build(&f.t, ok).await;
    assert_eq!(
        (
            r["stage"].as_str().unwrap(),
            r["retryable"].as_bool().unwrap()
        ),
        ("failed", true),
        "{r}"
    );
    // nothing half-written
    let outputs = lmcp::tools::pdf::outputs_dir(&f.t.host, &f.ws).unwrap();
    let left: Vec<String> = std::fs::read_dir(&outputs)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.iter().all(|n| !n.starts_with(".tmp")), "{left:?}");
    let _ = f.dir;
}

/// Renders one page (1-based) at `dpi` with hayro, a pure-Rust rasterizer, so `cargo test` needs
/// nothing but cargo. With the `interop` feature (the cross-check step of `.ci/run`) the page is
/// also rendered by poppler's pdftoppm, an independent implementation, and the two must agree.
fn render_page(pdf: &str, page: usize, dpi: u32, scratch: &Path) -> image::RgbImage {
    let rendered = render_with_hayro(pdf, page, dpi);
    #[cfg(feature = "interop")]
    {
        let poppler = render_with_pdftoppm(pdf, page, dpi, scratch);
        assert_same_render(&rendered, &poppler, pdf, page);
    }
    let _ = scratch;
    rendered
}

fn render_with_hayro(pdf: &str, page: usize, dpi: u32) -> image::RgbImage {
    use hayro::hayro_syntax::Pdf;
    let data = std::fs::read(pdf).unwrap();
    let doc = Pdf::new(data).unwrap_or_else(|e| panic!("hayro cannot read {pdf}: {e:?}"));
    let pixmaps = hayro::render_pdf(
        &doc,
        dpi as f32 / 72.0,
        hayro::hayro_interpret::InterpreterSettings::default(),
        &hayro::RenderSettings::default(),
        Some(page - 1..=page - 1),
    )
    .unwrap_or_else(|| panic!("hayro cannot render {pdf}"));
    let pixmap = pixmaps
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{pdf} has no page {page}"));
    // An opaque page on white: premultiplied RGBA is plain RGBA.
    let (w, h) = (u32::from(pixmap.width()), u32::from(pixmap.height()));
    let rgba = pixmap.data_as_u8_slice();
    image::RgbImage::from_fn(w, h, |x, y| {
        let i = ((y * w + x) * 4) as usize;
        image::Rgb([rgba[i], rgba[i + 1], rgba[i + 2]])
    })
}

#[cfg(feature = "interop")]
fn render_with_pdftoppm(pdf: &str, page: usize, dpi: u32, scratch: &Path) -> image::RgbImage {
    if std::process::Command::new("pdftoppm")
        .arg("-v")
        .output()
        .is_err()
    {
        panic!(
            "pdftoppm is missing: `apt-get install poppler-utils` (the .ci/run interop step installs it)"
        );
    }
    let out = scratch.join(format!("render-{page}"));
    let n = page.to_string();
    let status = std::process::Command::new("pdftoppm")
        .args([
            "-r",
            &dpi.to_string(),
            "-f",
            &n,
            "-l",
            &n,
            "-png",
            "-singlefile",
            pdf,
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success(), "pdftoppm failed on {pdf}");
    image::open(format!("{}.png", out.display()))
        .unwrap()
        .to_rgb8()
}

/// The two renders have the same size (±1 pixel of rounding) and, at grid points inside flat
/// areas, the same colour within a small tolerance (within two pixels, for rounding).
#[cfg(feature = "interop")]
fn assert_same_render(ours: &image::RgbImage, poppler: &image::RgbImage, pdf: &str, page: usize) {
    let (w, h) = ours.dimensions();
    let (pw, ph) = poppler.dimensions();
    assert!(
        w.abs_diff(pw) <= 1 && h.abs_diff(ph) <= 1,
        "{pdf} page {page}: hayro {w}×{h}, pdftoppm {pw}×{ph}"
    );
    let close = |a: &image::Rgb<u8>, b: &image::Rgb<u8>| {
        (0..3).all(|c| (a[c] as i32 - b[c] as i32).abs() <= 24)
    };
    // The pixel at (x, y) offset by (dx, dy) in `img`, if inside.
    let at = |img: &image::RgbImage, x: u32, y: u32, dx: i64, dy: i64| {
        let (nx, ny) = (x as i64 + dx, y as i64 + dy);
        let (iw, ih) = img.dimensions();
        (nx >= 0 && ny >= 0 && (nx as u32) < iw && (ny as u32) < ih)
            .then(|| *img.get_pixel(nx as u32, ny as u32))
    };
    let (mut differ, mut total) = (0, 0);
    for gy in 1..20 {
        for gx in 1..20 {
            let (x, y) = (w.min(pw) * gx / 20, h.min(ph) * gy / 20);
            let a = *ours.get_pixel(x, y);
            // Only points inside a flat area are compared: poppler smooths scaled images, so
            // an edge may spread over a few pixels there.
            let flat = (-4..=4)
                .all(|dx| (-4..=4).all(|dy| at(ours, x, y, dx, dy).is_none_or(|b| close(&a, &b))));
            if !flat {
                continue;
            }
            total += 1;
            let matched = (-2..=2).any(|dx| {
                (-2..=2).any(|dy| at(poppler, x, y, dx, dy).is_some_and(|b| close(&a, &b)))
            });
            if !matched {
                differ += 1;
            }
        }
    }
    assert!(
        total >= 180,
        "{pdf} page {page}: too few flat points to compare ({total})"
    );
    assert!(
        differ * 20 <= total,
        "{pdf} page {page}: {differ} of {total} sampled pixels differ between hayro and pdftoppm"
    );
}

/// 'W' for near white, else the channel ('R', 'G', 'B') that clearly dominates, else '?'.
fn hue(p: image::Rgb<u8>) -> char {
    if p.0.iter().all(|c| *c > 200) {
        return 'W';
    }
    let (i, max) = p.0.iter().enumerate().max_by_key(|(_, c)| **c).unwrap();
    let dominant =
        p.0.iter()
            .enumerate()
            .all(|(j, c)| j == i || *max as i32 - *c as i32 > 40);
    if dominant { ['R', 'G', 'B'][i] } else { '?' }
}

fn close(a: image::Rgb<u8>, b: image::Rgb<u8>, tolerance: i32) -> bool {
    (0..3).all(|c| (a[c] as i32 - b[c] as i32).abs() <= tolerance)
}

/// Renders page 1 and compares it with the source image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rendered_page_matches_its_source() {
    // Left half red, right half blue, fully opaque: placed on a square page with a margin.
    let src = image::RgbaImage::from_fn(100, 100, |x, _| {
        if x < 50 {
            image::Rgba([255, 0, 0, 255])
        } else {
            image::Rgba([0, 0, 255, 255])
        }
    });
    let mut png = std::io::Cursor::new(Vec::new());
    src.write_to(&mut png, image::ImageFormat::Png).unwrap();
    let f = fixture(&[("rb.png", png.into_inner())]).await;
    let r = call_yes(
        &f.t.host,
        "build_image_pdf",
        json!({"workspace_id": f.ws, "source_asset_ids": [1], "title": "r", "preset": "square"}),
    )
    .await
    .unwrap();
    let page = render_page(r["file_path"].as_str().unwrap(), 1, 20, f.t.home());
    let (w, h) = page.dimensions();
    let px = |fx: f32, fy: f32| *page.get_pixel((w as f32 * fx) as u32, (h as f32 * fy) as u32);
    let left = px(0.3, 0.5);
    let right = px(0.7, 0.5);
    let margin = px(0.01, 0.01);
    assert!(left[0] > 200 && left[2] < 60, "left is red: {left:?}");
    assert!(right[2] > 200 && right[0] < 60, "right is blue: {right:?}");
    assert!(
        margin[0] > 240 && margin[1] > 240 && margin[2] > 240,
        "the margin is white: {margin:?}"
    );
}

/// A PNG file's IDAT data, joined: its compressed rows.
fn png_idat(png: &[u8]) -> Vec<u8> {
    let mut at = 8;
    let mut idat = Vec::new();
    while at + 12 <= png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        if &png[at + 4..at + 8] == b"IDAT" {
            idat.extend_from_slice(&png[at + 8..at + 8 + len]);
        }
        at += 12 + len;
    }
    idat
}

/// An opaque PNG's compressed rows go into the PDF as they are, as img2pdf embeds them (#39: a
/// page never larger than the file's own data), and the page still renders as its source (with
/// the `interop` feature, by pdftoppm too): RGB at 8 bits and gray at 16. A PNG with alpha is
/// encoded anew (its colour and mask are separate images in a PDF).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opaque_png_is_embedded_as_its_own_rows_and_renders_as_its_source() {
    let rgb = image::RgbImage::from_fn(120, 80, |x, y| match (x < 60, y < 40) {
        (true, true) => image::Rgb([255, 0, 0]),
        (false, true) => image::Rgb([0, 160, 0]),
        (true, false) => image::Rgb([0, 0, 255]),
        (false, false) => image::Rgb([255, 255, 255]),
    });
    let gray = image::ImageBuffer::<image::Luma<u16>, _>::from_fn(90, 60, |x, _| {
        image::Luma([if x < 45 { 0x2000 } else { 0xE000 }])
    });
    let rgba = image::RgbaImage::from_pixel(30, 20, image::Rgba([9, 9, 9, 128]));
    let png = |img: image::DynamicImage| {
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    };
    let files = [
        ("rgb.png", png(rgb.into())),
        ("gray16.png", png(image::DynamicImage::ImageLuma16(gray))),
        ("rgba.png", png(rgba.into())),
    ];
    let f = fixture(&files).await;
    let r = call_yes(
        &f.t.host,
        "build_image_pdf",
        json!({"workspace_id": f.ws, "source_asset_ids": [1, 2, 3], "title": "p", "preset": "square"}),
    )
    .await
    .unwrap();
    let pdf = r["file_path"].as_str().unwrap();
    let doc = lopdf::Document::load(pdf).unwrap();
    let pages: Vec<_> = doc.get_pages().into_values().collect();
    for (n, (name, bytes)) in files.iter().enumerate() {
        let s = stream_of(&doc, pages[n]);
        let same = s.content == png_idat(bytes);
        assert_eq!(
            same,
            *name != "rgba.png",
            "{name}: embedded as its own rows"
        );
        let parms = s.dict.get(b"DecodeParms").unwrap().as_dict().unwrap();
        assert_eq!(parms.get(b"Predictor").unwrap().as_i64().unwrap(), 15);
    }
    let page = render_page(pdf, 1, 30, f.t.home());
    let placed = &serde_json::from_slice::<Value>(
        &std::fs::read(r["manifest_path"].as_str().unwrap()).unwrap(),
    )
    .unwrap()["pages"];
    let seen = quadrants(&page, 210.0, &placed[0]["placement_mm"]);
    for (got, want) in seen.iter().zip([RED, GREEN, BLUE, WHITE]) {
        assert!(close(*got, want, 40), "{seen:?}");
    }
    let page = render_page(pdf, 2, 30, f.t.home());
    let [left, right, ..] = quadrants(&page, 210.0, &placed[1]["placement_mm"]);
    // 0x2000 and 0xE000 of 0xFFFF: 32 and 224 of 255
    assert!(close(left, image::Rgb([32; 3]), 24), "{left:?}");
    assert!(close(right, image::Rgb([224; 3]), 24), "{right:?}");
}

const RED: image::Rgb<u8> = image::Rgb([255, 0, 0]);
const GREEN: image::Rgb<u8> = image::Rgb([0, 160, 0]);
const BLUE: image::Rgb<u8> = image::Rgb([0, 0, 255]);
const WHITE: image::Rgb<u8> = image::Rgb([255, 255, 255]);

/// The colour at the centre of each quadrant of the image drawn at `placement_mm` on a page
/// `page_mm` tall: top left, top right, bottom left, bottom right as seen.
fn quadrants(page: &image::RgbImage, page_mm: f64, placed: &Value) -> [image::Rgb<u8>; 4] {
    let px_per_mm = page.height() as f64 / page_mm;
    let (x, y, w, h) = (
        placed["x"].as_f64().unwrap(),
        placed["y"].as_f64().unwrap(),
        placed["width"].as_f64().unwrap(),
        placed["height"].as_f64().unwrap(),
    );
    let top = page_mm - (y + h);
    let at = |fx: f64, fy: f64| {
        *page.get_pixel(
            ((x + w * fx) * px_per_mm) as u32,
            ((top + h * fy) * px_per_mm) as u32,
        )
    };
    [
        at(0.25, 0.25),
        at(0.75, 0.25),
        at(0.25, 0.75),
        at(0.75, 0.75),
    ]
}

/// Every EXIF orientation (and the invalid 0 and 9) comes out upright and unmirrored: the page,
/// rendered, shows what the source shows once the orientation is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_orientation_renders_upright_and_unmirrored() {
    // Four coloured quadrants, wider than tall, so any turn or mirror moves a colour.
    let src = image::RgbImage::from_fn(96, 64, |x, y| match (x >= 48, y >= 32) {
        (false, false) => RED,
        (true, false) => GREEN,
        (false, true) => BLUE,
        (true, true) => WHITE,
    });
    let plain = jpeg_bytes(&src);
    let orientations: Vec<u16> = (0..=9).collect();
    let files: Vec<(String, Vec<u8>)> = orientations
        .iter()
        .map(|o| (format!("o{o}.jpg"), with_orientation(&plain, *o)))
        .collect();
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let f = fixture(&refs).await;
    let ids: Vec<u64> = (1..=orientations.len() as u64).collect();
    let r = call_yes(
        &f.t.host,
        "build_image_pdf",
        json!({"workspace_id": f.ws, "source_asset_ids": ids, "title": "o", "preset": "portrait"}),
    )
    .await
    .unwrap();
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(r["manifest_path"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    for (i, o) in orientations.iter().enumerate() {
        // What a viewer that honours EXIF shows.
        let mut upright = image::DynamicImage::ImageRgb8(src.clone());
        if let Some(t) = image::metadata::Orientation::from_exif(*o as u8) {
            upright.apply_orientation(t);
        }
        let upright = upright.to_rgb8();
        let (uw, uh) = upright.dimensions();
        let expected = [(0.25, 0.25), (0.75, 0.25), (0.25, 0.75), (0.75, 0.75)]
            .map(|(fx, fy)| *upright.get_pixel((uw as f64 * fx) as u32, (uh as f64 * fy) as u32));
        let page = render_page(r["file_path"].as_str().unwrap(), i + 1, 30, f.t.home());
        let seen = quadrants(&page, 297.0, &manifest["pages"][i]["placement_mm"]);
        for q in 0..4 {
            assert!(
                close(seen[q], expected[q], 70),
                "orientation {o}: quadrant {q} shows {:?}, expected {:?}",
                seen[q],
                expected[q]
            );
        }
    }
}

/// A CMYK JPEG written the Adobe way (APP14, inverted samples) is embedded as it is, with the
/// `Decode` array that turns it the right way round — and renders in its true colours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adobe_cmyk_jpeg_renders_in_its_true_colours() {
    let cmyk =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cmyk-adobe.jpg"))
            .unwrap();
    let f = fixture(&[("cmyk.jpg", cmyk.clone())]).await;
    let r = call_yes(
        &f.t.host,
        "build_image_pdf",
        json!({"workspace_id": f.ws, "source_asset_ids": [1], "title": "c", "preset": "square"}),
    )
    .await
    .unwrap();
    let path = r["file_path"].as_str().unwrap();
    let doc = lopdf::Document::load(path).unwrap();
    let (_, page_id) = doc.get_pages().into_iter().next().unwrap();
    let img = stream_of(&doc, page_id);
    assert_eq!(name_in(img, "ColorSpace"), b"DeviceCMYK");
    assert_eq!(name_in(img, "Filter"), b"DCTDecode");
    let decode: Vec<i64> = img
        .dict
        .get(b"Decode")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_i64().unwrap())
        .collect();
    assert_eq!(decode, [1, 0, 1, 0, 1, 0, 1, 0]);
    assert_eq!(img.content, cmyk, "embedded byte for byte");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(r["manifest_path"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    let page = render_page(path, 1, 30, f.t.home());
    let seen = quadrants(&page, 210.0, &manifest["pages"][0]["placement_mm"]);
    // Poppler converts CMYK with a profile-like curve, so compare hues, not exact values: an
    // inverted image would show black, cyan, magenta or yellow instead.
    for (q, want) in ['R', 'G', 'B', 'W'].into_iter().enumerate() {
        assert_eq!(hue(seen[q]), want, "quadrant {q} shows {:?}", seen[q]);
    }
}

/// A name entry of a stream's dictionary.
fn name_in<'a>(stream: &'a lopdf::Stream, key: &str) -> &'a [u8] {
    stream
        .dict
        .get(key.as_bytes())
        .and_then(lopdf::Object::as_name)
        .unwrap_or_else(|_| panic!("no name /{key}"))
}

fn fixture_file(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

/// JPEGs a PDF cannot show as they are: lossless ones (SOF3, here 12-bit gray and RGB) are
/// decoded and stored losslessly, 12-bit samples widened to 16; arithmetic-coded ones are
/// re-coded with Huffman codes (the same coefficients) and embedded as JPEG.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jpegs_pdf_cannot_show_are_decoded_or_recoded() {
    let f = fixture(&[
        ("gray12.jpg", fixture_file("lossless-12bit-gray.jpg")),
        ("rgb.jpg", fixture_file("lossless-rgb.jpg")),
    ])
    .await;
    let r = call_yes(
        &f.t.host,
        "build_image_pdf",
        json!({"workspace_id": f.ws, "source_asset_ids": [1, 2], "title": "l", "preset": "square"}),
    )
    .await
    .unwrap();
    assert_eq!(r["stage"], "ready", "{r}");
    let path = r["file_path"].as_str().unwrap();
    let doc = lopdf::Document::load(path).unwrap();
    let pages: Vec<_> = doc.get_pages().into_values().collect();
    let gray = stream_of(&doc, pages[0]);
    assert_eq!(name_in(gray, "Filter"), b"FlateDecode");
    assert_eq!(name_in(gray, "ColorSpace"), b"DeviceGray");
    assert_eq!(
        gray.dict
            .get(b"BitsPerComponent")
            .unwrap()
            .as_i64()
            .unwrap(),
        16
    );
    // The fixture's samples are (x*1000 + y*300) mod 4096 at 12 bits; stored scaled to 16.
    let samples = gray.decompressed_content().unwrap();
    assert_eq!(samples.len(), 64 * 48 * 2);
    for (x, y) in [(0, 0), (5, 0), (63, 47), (17, 30)] {
        let twelve = (x * 1000 + y * 300) % 4096;
        let want = ((twelve * 65535 + 2047) / 4095) as u16;
        let at = (y * 64 + x) * 2;
        assert_eq!(
            u16::from_be_bytes([samples[at], samples[at + 1]]),
            want,
            "({x},{y})"
        );
    }
    let rgb = stream_of(&doc, pages[1]);
    assert_eq!(name_in(rgb, "Filter"), b"FlateDecode");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(r["manifest_path"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["pages"][1]["embedding"], "flate");
    let page = render_page(path, 2, 30, f.t.home());
    let seen = quadrants(&page, 210.0, &manifest["pages"][1]["placement_mm"]);
    for (q, want) in [RED, GREEN, BLUE, WHITE].into_iter().enumerate() {
        assert!(
            close(seen[q], want, 40),
            "quadrant {q} shows {:?}, expected {want:?}",
            seen[q]
        );
    }
    // Arithmetic coding (sequential with restarts, and progressive): re-coded with Huffman
    // codes and embedded as JPEG; the same pixels as jpegtran's re-coding of the same file.
    for (n, name) in ["arith-420", "arith-progressive"].iter().enumerate() {
        std::fs::write(
            f.dir.join(format!("{name}.jpg")),
            fixture_file(&format!("{name}.jpg")),
        )
        .unwrap();
        let a = call_yes(
            &f.t.host,
            "asset_import",
            json!({"workspace_id": f.ws, "path": format!("{name}.jpg")}),
        )
        .await
        .unwrap();
        assert_eq!(a["asset_id"], 3 + n as u64);
    }
    let r = call_yes(&f.t.host, "build_image_pdf", json!({"workspace_id": f.ws, "source_asset_ids": [3, 4], "title": "a", "preset": "portrait"})).await.unwrap();
    let doc = lopdf::Document::load(r["file_path"].as_str().unwrap()).unwrap();
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(r["manifest_path"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    for (i, page) in doc.get_pages().into_values().enumerate() {
        let img = stream_of(&doc, page);
        assert_eq!(name_in(img, "Filter"), b"DCTDecode");
        assert_eq!(manifest["pages"][i]["embedding"], "jpeg-recoded");
        let name = ["arith-420", "arith-progressive"][i];
        let decode = |b: &[u8]| jpeg_decoder::Decoder::new(b).decode().unwrap();
        assert_eq!(
            decode(&img.content),
            decode(&fixture_file(&format!("{name}.huffman.jpg"))),
            "{name}"
        );
    }
}

/// What import prepares is a cache: removed or stale, a build makes it again from the asset;
/// an asset file changed behind our back is refused, not embedded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_planes_are_remade_when_missing_or_stale() {
    let mut png = std::io::Cursor::new(Vec::new());
    image::RgbaImage::from_fn(30, 20, |x, y| {
        image::Rgba([x as u8 * 8, y as u8 * 12, 90, 128])
    })
    .write_to(&mut png, image::ImageFormat::Png)
    .unwrap();
    let f = fixture(&[("a.png", png.into_inner())]).await;
    let args =
        json!({"workspace_id": f.ws, "source_asset_ids": [1], "title": "p", "preset": "square"});
    let first = call_yes(&f.t.host, "build_image_pdf", args.clone())
        .await
        .unwrap();
    let pdf = |r: &Value| std::fs::read(r["file_path"].as_str().unwrap()).unwrap();
    let image_bytes = |bytes: &[u8]| {
        let doc = lopdf::Document::load_mem(bytes).unwrap();
        let (_, page_id) = doc.get_pages().into_iter().next().unwrap();
        stream_of(&doc, page_id).content.clone()
    };
    let (_, stored) = lmcp::tools::assets::asset(&f.t.host, &f.ws, 1).unwrap();
    let assets_dir = stored.parent().unwrap().to_path_buf();
    let prepared = assets_dir.join("1.prepared");
    let thumb = assets_dir.join("1.thumb");
    assert!(
        prepared.exists() && thumb.exists(),
        "import prepared the page"
    );
    // Removed: made again, the same bytes.
    std::fs::remove_file(&prepared).unwrap();
    std::fs::remove_file(&thumb).unwrap();
    let second = call_yes(&f.t.host, "build_image_pdf", args.clone())
        .await
        .unwrap();
    assert_eq!(second["stage"], "ready", "{second}");
    assert!(
        prepared.exists() && thumb.exists(),
        "the build made them again"
    );
    assert_eq!(image_bytes(&pdf(&first)), image_bytes(&pdf(&second)));
    // Stale (made from other bytes): not used.
    let text = std::fs::read(&prepared).unwrap();
    let line_end = text.iter().position(|b| *b == b'\n').unwrap();
    let mut header: Value = serde_json::from_slice(&text[..line_end]).unwrap();
    header["source_sha256"] = json!("0".repeat(64));
    let mut stale = serde_json::to_vec(&header).unwrap();
    stale.extend_from_slice(&text[line_end..]);
    std::fs::write(&prepared, &stale).unwrap();
    let third = call_yes(&f.t.host, "build_image_pdf", args.clone())
        .await
        .unwrap();
    assert_eq!(image_bytes(&pdf(&first)), image_bytes(&pdf(&third)));
    assert_eq!(
        std::fs::read(&prepared).unwrap(),
        text,
        "remade from the asset"
    );
    // The asset's own file cut short: refused, and not retryable (importing again mends it).
    let bytes = std::fs::read(&stored).unwrap();
    std::fs::write(&stored, &bytes[..bytes.len() / 2]).unwrap();
    let r = failed_build(&f.t, args).await;
    assert_eq!(
        (r["stage"].as_str(), r["retryable"].as_bool()),
        (Some("failed"), Some(false)),
        "{r}"
    );
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("import the image again"),
        "{r}"
    );
}

#[test]
fn lmcp_pdf_builds_from_files_named_on_the_command_line() {
    let home = tempfile::tempdir().unwrap();
    let pics = tempfile::tempdir().unwrap();
    let a = pics.path().join("a.jpg");
    let b = pics.path().join("b.png");
    std::fs::write(
        &a,
        jpeg_bytes(&image::RgbImage::from_pixel(30, 20, image::Rgb([9, 9, 9]))),
    )
    .unwrap();
    image::RgbaImage::from_pixel(10, 10, image::Rgba([1, 2, 3, 128]))
        .save(&b)
        .unwrap();
    let out = pics.path().join("out");
    let o = common::lmcp(
        home.path(),
        &[
            "pdf",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--title",
            "Two",
            "--preset",
            "landscape",
            "-o",
            out.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = common::json_out(&o);
    assert_eq!(v["pages"].as_array().unwrap().len(), 2);
    let doc = lopdf::Document::load(out.join("document.pdf")).unwrap();
    assert_eq!(doc.get_pages().len(), 2);
    assert!(out.join("manifest.json").exists() && out.join("preview.html").exists());
    // with -o, the scratch workspace goes too (nothing left but what was asked for)
    let o = common::lmcp(home.path(), &["call", "workspace_list", "--json"]);
    let listed = common::json_out(&o);
    assert_eq!(listed["result"]["workspaces"], json!([]), "{listed}");
    // the same folder again: refused before anything is built, the files kept; --force replaces
    let before = std::fs::read(out.join("manifest.json")).unwrap();
    let again = |force: bool| {
        let mut args = vec![
            "pdf",
            a.to_str().unwrap(),
            "--title",
            "Again",
            "-o",
            out.to_str().unwrap(),
        ];
        if force {
            args.push("--force");
        }
        common::lmcp(home.path(), &args)
    };
    let o = again(false);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    assert_eq!(std::fs::read(out.join("manifest.json")).unwrap(), before);
    assert_eq!(again(true).status.code(), Some(0));
    assert_ne!(std::fs::read(out.join("manifest.json")).unwrap(), before);
    // without -o, the results stay in the scratch workspace, which is listed
    let o = common::lmcp(
        home.path(),
        &["pdf", a.to_str().unwrap(), "--title", "Kept", "--json"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let kept = common::json_out(&o);
    assert!(
        Path::new(kept["file_path"].as_str().unwrap()).exists(),
        "{kept}"
    );
    let o = common::lmcp(home.path(), &["call", "workspace_list", "--json"]);
    assert_eq!(
        common::json_out(&o)["result"]["workspaces"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // a workspace that stays is written like any other, never as scratch (unsynced, #39)
    let ws_json = Path::new(kept["file_path"].as_str().unwrap())
        .ancestors()
        .nth(3)
        .unwrap()
        .join("workspace.json");
    let ws: Value = serde_json::from_slice(&std::fs::read(&ws_json).unwrap()).unwrap();
    assert!(ws.get("scratch").is_none(), "{ws}");
    // the staged copies are gone; a missing file is a clear error
    let staged: Vec<_> = std::fs::read_dir(home.path().join("data/workspace"))
        .unwrap()
        .flatten()
        .collect();
    assert!(staged.is_empty(), "{staged:?}");
    let o = common::lmcp(home.path(), &["pdf", "/no/such.png", "--title", "x"]);
    // bad input, as a damaged file is
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/no/such.png"));
    let o = common::lmcp(home.path(), &["call", "workspace_list", "--json"]);
    let listed = common::json_out(&o);
    assert_eq!(
        listed["result"]["workspaces"].as_array().unwrap().len(),
        1,
        "a failed run leaves no scratch workspace: {listed}"
    );
}

/// `lmcp pdf` for people (#34): without `--title` the first file's stem is the title; the
/// manifest's lengths are rounded to 0.01 mm (no `21.833335876464844`) and each page names the
/// file it was imported from; without `-o` one line says where the three files went.
#[test]
fn lmcp_pdf_titles_rounds_and_says_where() {
    let home = tempfile::tempdir().unwrap();
    let pics = tempfile::tempdir().unwrap();
    let a = pics.path().join("beach day.jpg");
    let b = pics.path().join("b.png");
    // 3:2 and 7:3 images leave placements that are no whole numbers of mm
    std::fs::write(
        &a,
        jpeg_bytes(&image::RgbImage::from_pixel(33, 19, image::Rgb([9, 9, 9]))),
    )
    .unwrap();
    image::RgbImage::from_pixel(70, 31, image::Rgb([1, 2, 3]))
        .save(&b)
        .unwrap();
    let o = common::lmcp(
        home.path(),
        &["pdf", a.to_str().unwrap(), b.to_str().unwrap()],
    );
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(said.lines().count(), 1, "{said}");
    let folder = said
        .trim_end()
        .rsplit_once(" to ")
        .map(|(_, f)| Path::new(f).to_path_buf())
        .unwrap_or_else(|| panic!("no folder in {said:?}"));
    assert!(
        said.starts_with(
            "wrote document.pdf, manifest.json and preview.html (2 page(s), portrait)"
        ),
        "{said}"
    );
    for f in ["document.pdf", "manifest.json", "preview.html"] {
        assert!(folder.join(f).is_file(), "{said}: {f}");
    }
    let text = std::fs::read_to_string(folder.join("manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(manifest["title"], "beach day");
    assert_eq!(manifest["pages"][0]["source_file"], "beach day.jpg");
    assert_eq!(manifest["pages"][1]["source_file"], "b.png");
    let mut lengths = vec![&manifest["margin_mm"], &manifest["page_size_mm"]["width"]];
    for p in manifest["pages"].as_array().unwrap() {
        for k in ["x", "y", "width", "height"] {
            lengths.push(&p["placement_mm"][k]);
        }
    }
    for l in lengths {
        let x = l.as_f64().unwrap();
        assert_eq!((x * 100.0).round() / 100.0, x, "{l} in {text}");
        assert!(
            l.to_string().split('.').nth(1).is_none_or(|d| d.len() <= 2),
            "{l}"
        );
    }
}

/// CRC-32 (IEEE) of a PNG chunk's type and data.
fn png_crc(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for b in bytes {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A small PNG whose header claims `width` × `height` at `bit_depth` and `color_type`: what a
/// decompression bomb's header says, without the gigabytes.
fn png_claiming(width: u32, height: u32, bit_depth: u8, color_type: u8) -> Vec<u8> {
    let mut png = std::io::Cursor::new(Vec::new());
    image::RgbaImage::new(1, 1)
        .write_to(&mut png, image::ImageFormat::Png)
        .unwrap();
    let mut png = png.into_inner();
    // IHDR sits at 8..33: length, "IHDR", 13 bytes of data, CRC
    png[16..20].copy_from_slice(&width.to_be_bytes());
    png[20..24].copy_from_slice(&height.to_be_bytes());
    png[24] = bit_depth;
    png[25] = color_type;
    let crc = png_crc(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

/// A small JPEG whose frame header claims `width` × `height`.
fn jpeg_claiming(width: u16, height: u16) -> Vec<u8> {
    let mut jpeg = jpeg_bytes(&image::RgbImage::new(8, 8));
    let sof = jpeg
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("a baseline frame header");
    // FFC0, length (2), precision (1), height (2), width (2)
    jpeg[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
    jpeg[sof + 7..sof + 9].copy_from_slice(&width.to_be_bytes());
    jpeg
}

/// Runs `lmcp ARGS` and returns its output with its peak resident memory in KiB, as lmcp itself
/// writes it to `LMCP_PEAK_FILE` (see `common::peak_rss` for why not `wait4`).
#[cfg(target_os = "linux")]
fn lmcp_with_peak_rss(home: &Path, args: &[&str]) -> (std::process::Output, i64) {
    let peak_file = tempfile::NamedTempFile::new().unwrap();
    let output = std::process::Command::new(common::bin())
        .args(args)
        .env("LMCP_HOME", home)
        .env("LMCP_PEAK_FILE", peak_file.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let bytes: i64 = std::fs::read_to_string(peak_file.path())
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or_else(|_| {
            panic!(
                "lmcp wrote no peak: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    (output, bytes / 1024)
}

/// Decompression bombs are refused from their headers, before anything is decoded: a
/// 30000×30000 RGBA PNG, a 1-bit 30000² PNG and a JPEG claiming 65000×65000 each fail at once,
/// naming their size and the limit, with the process staying small (they took 9.46 GB,
/// 1.73 GB and a 65000² page before). A configured budget is what is checked.
#[cfg(target_os = "linux")]
#[test]
fn decompression_bombs_are_refused_before_decoding() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let bombs = [
        (
            "rgba.png",
            png_claiming(30_000, 30_000, 8, 6),
            "30000×30000",
        ),
        (
            "bits.png",
            png_claiming(30_000, 30_000, 1, 0),
            "30000×30000",
        ),
        ("huge.jpg", jpeg_claiming(65_000, 65_000), "65000×65000"),
    ];
    for (name, bytes, size) in bombs {
        let file = h.join(name);
        std::fs::write(&file, &bytes).unwrap();
        let out_dir = h.join(format!("out-{name}"));
        let started = std::time::Instant::now();
        let (out, peak_kib) = lmcp_with_peak_rss(
            h,
            &[
                "pdf",
                "-t",
                "bomb",
                file.to_str().unwrap(),
                "-o",
                out_dir.to_str().unwrap(),
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{name}: {err}");
        assert!(
            err.contains(size) && err.contains("limits.image_megapixels"),
            "{name}: {err}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{name}"
        );
        assert!(peak_kib < 200 * 1024, "{name}: peak RSS {peak_kib} KiB");
        assert!(!out_dir.join("document.pdf").exists());
    }
    // the budget is the config's: a 2-megapixel limit refuses a 3-megapixel image
    let config = h.join("config/config.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        json!({"limits": {"image_megapixels": 2}}).to_string(),
    )
    .unwrap();
    let file = h.join("three.png");
    image::RgbImage::new(2000, 1500).save(&file).unwrap();
    let (out, _) = lmcp_with_peak_rss(
        h,
        &[
            "pdf",
            "-t",
            "t",
            file.to_str().unwrap(),
            "-o",
            h.join("o3").to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at most 2 megapixels"), "{err}");
}

/// `lmcp pdf -t TITLE IMAGES... -o OUT` with `LMCP_HOME` at `home`.
fn lmcp_pdf(home: &Path, title: &str, images: &[&PathBuf], out: &Path) -> std::process::Output {
    let mut args = vec!["pdf", "-t", title, "-o", out.to_str().unwrap()];
    args.extend(images.iter().map(|f| f.to_str().unwrap()));
    common::lmcp(home, &args)
}

/// [`lmcp_pdf`] that must succeed and write the document.
fn lmcp_pdf_ok(home: &Path, title: &str, images: &[&PathBuf], out: &Path) {
    let o = lmcp_pdf(home, title, images, out);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.join("document.pdf").is_file());
}

/// A title of the longest length a document takes (200 characters) builds from the command
/// line too (its scratch workspace name, "pdf: " + the title, was too long).
#[test]
fn the_longest_title_builds() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let image = h.join("one.png");
    image::RgbImage::from_pixel(4, 3, image::Rgb([10, 200, 10]))
        .save(&image)
        .unwrap();
    let title = "T".repeat(200);
    let out_dir = h.join("out");
    lmcp_pdf_ok(h, &title, &[&image], &out_dir);
}

/// A bad or missing file among good ones: `lmcp pdf` exits 2 for both, names the file as it
/// was given (not its staged copy), and leaves no scratch workspace or staging folder behind
/// (imports still running wrote into the workspace while it was being removed).
#[test]
fn a_failed_lmcp_pdf_leaves_nothing_behind() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let good = h.join("good.png");
    image::RgbImage::from_pixel(64, 48, image::Rgb([1, 2, 3]))
        .save(&good)
        .unwrap();
    let bad = h.join("bad.png");
    std::fs::write(&bad, "not an image").unwrap();
    let missing = h.join("missing.png");
    for (files, named) in [
        (vec![&good, &bad, &good, &good], "bad.png"),
        (vec![&good, &missing], "missing.png"),
    ] {
        let out_dir = h.join("out");
        let out = lmcp_pdf(h, "t", &files, &out_dir);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(named) && !err.contains(".pdf-"), "{err}");
        let workspaces = std::fs::read_dir(h.join("data/workspaces"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(workspaces, 0, "a scratch workspace was left");
        let staging: Vec<_> = std::fs::read_dir(h.join("data/workspace"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(staging.is_empty(), "{staging:?}");
        assert!(!out_dir.join("document.pdf").exists());
    }
}

/// A symlinked image named on the command line is followed to its target (it was refused as
/// leading outside the allowed roots).
#[cfg(unix)]
#[test]
fn a_symlinked_image_is_followed() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let real = h.join("real.png");
    image::RgbImage::from_pixel(8, 8, image::Rgb([9, 9, 200]))
        .save(&real)
        .unwrap();
    let link = h.join("link.png");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out_dir = h.join("out");
    lmcp_pdf_ok(h, "t", &[&link], &out_dir);
}

/// A JPEG cut in half with an end-of-image marker appended (most decoders show it, half grey)
/// is refused at import, baseline and progressive alike, and `lmcp pdf` exits 2 naming it.
#[test]
fn a_cut_jpeg_with_an_end_marker_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let whole = jpeg_bytes(&image::RgbImage::from_fn(640, 480, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x * y) % 256) as u8])
    }));
    for (name, bytes) in [
        ("baseline", whole),
        ("progressive", fixture_file("progressive-restart.jpg")),
    ] {
        let mut half = bytes[..bytes.len() / 2].to_vec();
        half.extend_from_slice(&[0xFF, 0xD9]);
        let file = h.join(format!("{name}-half.jpg"));
        std::fs::write(&file, &half).unwrap();
        let out = lmcp_pdf(h, "t", &[&file], &h.join("out"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(&format!("{name}-half.jpg")) && err.contains("cut short"),
            "{name}: {err}"
        );
        assert!(!h.join("out").exists());
    }
}

/// `lmcp pdf -o DIR` killed (SIGKILL) at any moment leaves DIR with all three files, whole, or
/// no DIR at all; the next run sweeps the staging folder a kill left beside it.
#[cfg(unix)]
#[test]
fn an_interrupted_lmcp_pdf_leaves_all_three_files_or_none() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let images: Vec<PathBuf> = (0..4)
        .map(|i| {
            let p = h.join(format!("{i}.jpg"));
            let img = image::RgbImage::from_fn(800, 600, |x, y| {
                image::Rgb([(x % 256) as u8, (y % 256) as u8, (i * 60) as u8])
            });
            std::fs::write(&p, jpeg_bytes(&img)).unwrap();
            p
        })
        .collect();
    let run = |out: &Path| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_lmcp"));
        cmd.args(["pdf", "-t", "t", "-o", out.to_str().unwrap()])
            .args(&images)
            .env("LMCP_HOME", h)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd
    };
    // how long a whole run takes here, to spread the kills over it
    let started = std::time::Instant::now();
    assert!(run(&h.join("whole")).status().unwrap().success());
    let whole = started.elapsed();
    // kills spread over one and a half runs' time (a busy machine runs slower), then one run
    // left to finish: each leaves all three files or no folder
    for i in 0..=24u32 {
        let out = h.join(format!("out{i}"));
        let mut child = run(&out).spawn().unwrap();
        if i < 24 {
            std::thread::sleep(whole * i / 16);
            let _ = child.kill();
        }
        let _ = child.wait();
        if !out.exists() {
            assert!(i < 24, "the run left to finish wrote nothing");
            continue;
        }
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["document.pdf", "manifest.json", "preview.html"],
            "run {i}"
        );
        let manifest: Value =
            serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(
            manifest["pages"].as_array().map(Vec::len),
            Some(4),
            "{manifest}"
        );
        lopdf::Document::load(out.join("document.pdf")).unwrap();
    }
    // What the killed runs left (scratch workspaces, staging folders) the last run swept. A
    // kill in the microseconds between a workspace's creation and the note naming it can
    // leave one unnamed workspace: at most one here, never a half-deleted one.
    let left: Vec<String> = std::fs::read_dir(h.join("data/workspaces"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        left.len() <= 1 && left.iter().all(|n| !n.starts_with('.')),
        "scratch workspaces left: {left:?}"
    );
    let staging: Vec<_> = std::fs::read_dir(h.join("data/workspace"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(staging.is_empty(), "staging folders left: {staging:?}");
    // a staging folder a kill left beside a DIR is swept by the next run into it
    let dead = {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    };
    let left = h.join(format!(".again.lmcp-pdf-{dead}-0123"));
    std::fs::create_dir(&left).unwrap();
    std::fs::write(left.join("document.pdf"), "half").unwrap();
    assert!(run(&h.join("again")).status().unwrap().success());
    assert!(!left.exists(), "the staging folder was left");
    assert!(h.join("again/document.pdf").is_file());
}

/// `lmcp pdf` imports side by side, yet asset ids follow the order the files were given (the
/// first file here is the slowest to import, so it used to get the last id).
#[test]
fn lmcp_pdf_asset_ids_follow_the_given_order() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let slow = h.join("slow.png");
    image::RgbaImage::from_fn(1500, 1200, |x, y| {
        image::Rgba([(x * y % 251) as u8, (x % 256) as u8, (y % 256) as u8, 200])
    })
    .save(&slow)
    .unwrap();
    let mut files = vec![slow];
    for i in 0..3u8 {
        let p = h.join(format!("quick{i}.png"));
        image::RgbImage::from_pixel(4, 4, image::Rgb([i, 0, 0]))
            .save(&p)
            .unwrap();
        files.push(p);
    }
    let out_dir = h.join("out");
    lmcp_pdf_ok(h, "t", &files.iter().collect::<Vec<_>>(), &out_dir);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("manifest.json")).unwrap()).unwrap();
    let ids: Vec<u64> = manifest["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["source_asset_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3, 4], "{manifest}");
}

/// A JPEG is embedded byte for byte from its stored asset: one changed behind lmcp's back (same
/// size, other bytes) is refused at build, not embedded under the manifest's old SHA-256.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_jpeg_changed_after_import_is_refused() {
    let img = image::RgbImage::from_fn(64, 48, |x, y| image::Rgb([x as u8 * 4, y as u8 * 5, 9]));
    let f = fixture(&[("a.jpg", jpeg_bytes(&img))]).await;
    let args =
        json!({"workspace_id": f.ws, "source_asset_ids": [1], "title": "T", "preset": "square"});
    assert_eq!(
        call_yes(&f.t.host, "build_image_pdf", args.clone())
            .await
            .unwrap()["stage"],
        "ready"
    );
    let (_, stored) = lmcp::tools::assets::asset(&f.t.host, &f.ws, 1).unwrap();
    let mut bytes = std::fs::read(&stored).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&stored, &bytes).unwrap();
    let r = failed_build(&f.t, args).await;
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("changed since it was imported"),
        "{r}"
    );
    // the check runs beside the writing (#39): the document written meanwhile is never put in
    // place; the first build's folder is all there is
    let outputs = lmcp::tools::pdf::outputs_dir(&f.t.host, &f.ws).unwrap();
    let left: Vec<_> = std::fs::read_dir(outputs)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

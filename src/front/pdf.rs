//! `lmcp pdf IMAGES... --title T --preset P [-o DIR]`: for people who just want the PDF.
//!
//! The images named on the command line are staged into a folder of the lmcp workspace (so the
//! imports stay inside the allowed roots), imported into a new scratch workspace and built, all
//! through the gate; the staged copies are removed afterwards. With `-o`, the document, manifest
//! and preview are copied there.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use super::cli::{emit, gated};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::store;

/// `lmcp pdf ...`
#[derive(Debug, Args)]
pub struct PdfArgs {
    /// The images, in page order (JPEG, PNG, GIF, WebP, TIFF, BMP).
    #[arg(required = true)]
    pub images: Vec<PathBuf>,
    /// The document's title.
    #[arg(short, long)]
    pub title: String,
    /// Page shape.
    #[arg(short, long, value_enum, default_value_t = PresetArg::Portrait)]
    pub preset: PresetArg,
    /// Copy document.pdf, manifest.json and preview.html into this folder.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
}

/// A page preset on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PresetArg {
    /// 210 × 210 mm.
    Square,
    /// A4 upright.
    Portrait,
    /// A4 turned.
    Landscape,
}

/// Runs `lmcp pdf`.
pub async fn pdf(host: &Arc<Host>, args: PdfArgs, json: bool) -> Result<u8> {
    let preset = match args.preset {
        PresetArg::Square => "square",
        PresetArg::Portrait => "portrait",
        PresetArg::Landscape => "landscape",
    };
    if args.images.len() > 20 {
        return Err(Error::Usage(format!(
            "{} images is more than the 20 a PDF build takes",
            args.images.len()
        )));
    }
    let staging_name = format!(".pdf-{}", uuid::Uuid::new_v4().simple());
    let staging = host.paths().workspace_dir().join(&staging_name);
    let result = build(host, &args, preset, &staging_name).await;
    let _ = std::fs::remove_dir_all(&staging);
    let built = result?;
    if built["stage"] != "ready" {
        return Err(Error::tool(
            "build_image_pdf",
            built["error"]
                .as_str()
                .unwrap_or("the build failed")
                .to_string(),
        ));
    }
    let mut value = built.clone();
    if let Some(dir) = &args.output {
        for (key, file) in [
            ("file_path", "document.pdf"),
            ("manifest_path", "manifest.json"),
            ("preview_path", "preview.html"),
        ] {
            let from = PathBuf::from(built[key].as_str().unwrap_or_default());
            let bytes = std::fs::read(&from).map_err(|e| Error::io(&from, e))?;
            let to = dir.join(file);
            store::atomic_write(&to, &bytes)?;
            value[key] = json!(to.display().to_string());
        }
        value["output_directory"] = json!(dir.display().to_string());
    }
    emit(json, &value, || {
        format!(
            "wrote {} ({} page(s), {preset})\npreview: {}\n",
            value["file_path"].as_str().unwrap_or(""),
            value["pages"].as_array().map_or(0, Vec::len),
            value["preview_path"].as_str().unwrap_or("")
        )
    });
    Ok(0)
}

async fn build(
    host: &Arc<Host>,
    args: &PdfArgs,
    preset: &str,
    staging_name: &str,
) -> Result<Value> {
    let staging = host.paths().workspace_dir().join(staging_name);
    store::ensure_dir(&staging)?;
    let ws = gated(
        host,
        "workspace_create",
        json!({"name": format!("pdf: {}", args.title)}),
        true,
        false,
    )
    .await
    .into_result()?;
    let id = ws["workspace_id"].as_str().unwrap_or("").to_string();
    let mut ids = Vec::new();
    for (n, image) in args.images.iter().enumerate() {
        let bytes = std::fs::read(image).map_err(|e| Error::io(image, e))?;
        let name = format!(
            "{n:02}-{}",
            image
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        store::atomic_write(&staging.join(&name), &bytes)?;
        let imported = gated(
            host,
            "asset_import",
            json!({"workspace_id": id, "path": format!("{staging_name}/{name}")}),
            true,
            false,
        )
        .await
        .into_result()
        .map_err(|e| Error::Usage(format!("{}: {e}", image.display())))?;
        ids.push(imported["asset_id"].clone());
    }
    let request =
        json!({"workspace_id": id, "source_asset_ids": ids, "title": args.title, "preset": preset});
    // Building is the person's own action here; the gate still applies its grants and modes.
    gated(host, "build_image_pdf", request, true, true)
        .await
        .into_result()
}

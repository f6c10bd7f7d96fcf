//! `lmcp pdf IMAGES... --title T --preset P [-o DIR]`: for people who just want the PDF.
//!
//! The images named on the command line are staged into a folder of the lmcp workspace (so the
//! imports stay inside the allowed roots), imported into a new scratch workspace and built, all
//! through the gate; the staged copies are removed afterwards. With `-o`, the document, manifest
//! and preview are put there all three or none (see [`deliver`]) and the scratch workspace is
//! removed; without it they stay in the scratch workspace, which `workspace_list` shows. A run
//! that fails at any point leaves no scratch workspace and nothing in `-o`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use super::door::{emit, gated};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::store;

/// `lmcp pdf ...`
#[derive(Debug, Args)]
pub struct PdfArgs {
    /// The images, in page order (JPEG, PNG, GIF, WebP, TIFF, BMP).
    #[arg(required = true)]
    pub images: Vec<PathBuf>,
    /// The document's title [default: the first image's file name without its extension].
    #[arg(short, long)]
    pub title: Option<String>,
    /// Page shape.
    #[arg(short, long, value_enum, default_value_t = PresetArg::Portrait)]
    pub preset: PresetArg,
    /// Copy document.pdf, manifest.json and preview.html into this folder.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Replace those files in DIR when they exist (otherwise lmcp refuses before building).
    #[arg(long, requires = "output")]
    pub force: bool,
}

impl PdfArgs {
    /// The title given, or the first image's file stem (`photos/trip.jpg`: `trip`): a title
    /// the person would otherwise have to think up before seeing the PDF at all.
    fn title(&self) -> String {
        self.title.clone().unwrap_or_else(|| {
            self.images
                .first()
                .and_then(|p| p.file_stem())
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
    }
}

/// The files `-o DIR` receives.
const OUTPUT_FILES: [(&str, &str); 3] = [
    ("file_path", "document.pdf"),
    ("manifest_path", "manifest.json"),
    ("preview_path", "preview.html"),
];

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
    if let Some(dir) = &args.output {
        check_output_dir(host, dir, args.force)?;
    }
    sweep_killed_runs(host).await;
    let staging_name = format!(
        "{RUN_STAGING}{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    );
    let staging = host.paths().workspace_dir().join(&staging_name);
    let mut scratch = None;
    let result = build(host, &args, preset, &staging_name, &mut scratch).await;
    // The staging folder (which names the scratch workspace for a sweep after a kill) goes
    // only once the scratch workspace has gone, or is to stay.
    let done_with = |staging: &Path| {
        let _ = std::fs::remove_dir_all(staging);
    };
    // a failed build is an error (exit 1), as at every door
    let built = match result {
        Ok(b) => b,
        Err(e) => {
            // Nothing in a failed scratch workspace is worth keeping.
            remove_scratch(host, scratch.as_deref()).await;
            done_with(&staging);
            return Err(e);
        }
    };
    let mut value = built.clone();
    if args.output.is_none() {
        // the results stay in the scratch workspace, which stays too
        done_with(&staging);
    }
    if let Some(dir) = &args.output {
        let delivered = deliver(&built, dir);
        // Either way the scratch workspace (a copy of every image and its prepared planes) goes:
        // the results are where the person asked for them, or the run failed as a whole.
        remove_scratch(host, scratch.as_deref()).await;
        done_with(&staging);
        delivered?;
        for (key, file) in OUTPUT_FILES {
            value[key] = json!(dir.join(file).display().to_string());
        }
        value["output_directory"] = json!(dir.display().to_string());
    }
    let pages = value["pages"].as_array().map_or(0, Vec::len);
    emit(json, &value, || match &args.output {
        Some(_) => format!(
            "wrote {} ({pages} page(s), {preset})\npreview: {}\n",
            value["file_path"].as_str().unwrap_or(""),
            value["preview_path"].as_str().unwrap_or("")
        ),
        // the results stay in lmcp's workspace: one line says where (the folder holds all three)
        None => format!(
            "wrote document.pdf, manifest.json and preview.html ({pages} page(s), {preset}) to {}",
            Path::new(value["file_path"].as_str().unwrap_or(""))
                .parent()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        ),
    });
    Ok(0)
}

/// Where the `n`th image is staged, under the run's staging folder: `NN/NAME`, a folder per
/// image, so two images of one name stay apart and each keeps its own name.
fn staged_name(n: usize, image: &Path) -> String {
    format!(
        "{n:02}/{}",
        image
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    )
}

/// The start of the name of a folder the results are staged in, in `-o DIR` (when it exists)
/// or beside it (`.DIR` + this, when it does not); the process id and a random part follow.
const STAGING: &str = ".lmcp-pdf-";

/// Puts the three result files into `dir` together or not at all. When `dir` does not exist
/// yet, they are staged in a folder beside it that is then renamed to `dir`: one atomic step,
/// so an interrupted run (even `kill -9`) leaves all three or no `dir`. When it exists, they
/// are staged inside it (copied whole and synced first when lmcp's data is on another file
/// system), then renamed into place one after the other — microseconds, during which Ctrl-C
/// is held off (lmcp listens for it) — so only a hard kill in that window can leave some.
/// Staging folders such a kill leaves are swept the next time (see [`sweep_staging`]).
fn deliver(built: &Value, dir: &Path) -> Result<()> {
    let staging_name = format!(
        "{STAGING}{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    );
    let fresh = std::fs::symlink_metadata(dir).is_err();
    let staging = if fresh {
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        store::ensure_dir(parent)?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        parent.join(format!(".{name}{staging_name}"))
    } else {
        dir.join(&staging_name)
    };
    let staged = (|| -> Result<()> {
        std::fs::create_dir(&staging).map_err(|e| Error::io(&staging, e))?;
        for (key, file) in OUTPUT_FILES {
            let from = PathBuf::from(built[key].as_str().unwrap_or_default());
            store::atomic_move(&from, &staging.join(file))?;
        }
        store::sync_dir(&staging);
        // `dir` may have appeared meanwhile: then the files go into it one by one after all
        if fresh && std::fs::rename(&staging, dir).is_ok() {
            store::sync_dir(dir.parent().unwrap_or(Path::new(".")));
            return Ok(());
        }
        for (_, file) in OUTPUT_FILES {
            let to = dir.join(file);
            std::fs::rename(staging.join(file), &to).map_err(|e| Error::io(&to, e))?;
        }
        store::sync_dir(dir);
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&staging);
    staged.map_err(|e| {
        Error::tool(
            "pdf",
            format!("the results could not be put into {}: {e}", dir.display()),
        )
    })
}

/// Removes staging folders an earlier `lmcp pdf -o` left in or beside `dir` when it was killed
/// (their process is gone).
fn sweep_staging(dir: &Path) {
    let beside = dir
        .file_name()
        .map(|n| format!(".{}{STAGING}", n.to_string_lossy()));
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    for (folder, prefix) in [(dir, Some(STAGING.to_string())), (parent, beside)] {
        let (Some(prefix), Ok(entries)) = (prefix, std::fs::read_dir(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            if pid.is_some_and(|pid| !process_alive(pid)) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// Whether a process with this id runs (on other platforms: assumed so, nothing is swept).
fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return true;
        };
        // signal 0 checks without sending; EPERM means it exists under another user
        // SAFETY: kill with signal 0 only checks for the process.
        let signalled = unsafe { libc::kill(pid, 0) } == 0;
        signalled || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// Checks `-o DIR` before anything is built: never lmcp's own folders, and the three result
/// files are replaced only with `--force`.
fn check_output_dir(host: &Host, dir: &Path, force: bool) -> Result<()> {
    if dir.is_dir() {
        super::door::refuse_own_folders(host, dir, dir)?;
    }
    sweep_staging(dir);
    if force {
        return Ok(());
    }
    let taken: Vec<String> = OUTPUT_FILES
        .iter()
        .filter(|(_, f)| std::fs::symlink_metadata(dir.join(f)).is_ok())
        .map(|(_, f)| f.to_string())
        .collect();
    if taken.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "{} already holds {}; nothing was built. Choose another folder, or pass --force to \
         replace them",
        dir.display(),
        taken.join(", ")
    )))
}

/// Removes the scratch workspace `lmcp pdf` made, if it made one, through the gate.
async fn remove_scratch(host: &Arc<Host>, workspace_id: Option<&str>) {
    if let Some(id) = workspace_id {
        let outcome = gated(
            host,
            "workspace_delete",
            json!({"workspace_id": id}),
            true,
            false,
        )
        .await;
        if let Err(e) = outcome.into_result() {
            host.warn(format!("the scratch workspace {id} was kept: {e}"));
        }
    }
}

/// The memory imports running side by side may be expected to take together (see
/// [`import_weight`]); one import alone may take more.
const IMPORT_MEMORY: u64 = 80 << 20;

/// About the memory importing a file takes: a JPEG is checked without decoding (its bytes, and
/// a copy being written), anything else is decoded and its planes filtered and compressed
/// (about three times its 8-bit RGBA size). Read from the header only; a file whose header
/// does not read counts as its size (its import will say what is wrong).
fn import_weight(path: &Path) -> u64 {
    // never opened unless a regular file (a FIFO would block the open; the import refuses it)
    let Some(size) = std::fs::metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
    else {
        return 0;
    };
    let mut head = [0u8; 2];
    let is_jpeg = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && head == [0xFF, 0xD8];
    if is_jpeg {
        return 2 * size;
    }
    // a header's metadata (a PNG's compressed ICC profile, say) may inflate to gigabytes: a
    // small allocation limit, and a header that needs more counts as its file's size
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(1 << 20);
    image::ImageReader::open(path)
        .and_then(|r| r.with_guessed_format())
        .ok()
        .and_then(|mut r| {
            r.limits(limits);
            r.into_dimensions().ok()
        })
        .map_or(size, |(w, h)| u64::from(w) * u64::from(h) * 4 * 3)
        .max(size)
}

/// The start of the name of the folder a run stages its images in, in lmcp's workspace folder
/// (its process id and a random part follow).
const RUN_STAGING: &str = ".pdf-";

/// The file in a run's staging folder naming its scratch workspace.
const SCRATCH_NOTE: &str = ".scratch-workspace";

/// Removes what runs killed before they could clean up left: their staging folders and the
/// scratch workspaces those name (through the gate).
async fn sweep_killed_runs(host: &Arc<Host>) {
    let Ok(entries) = std::fs::read_dir(host.paths().workspace_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(RUN_STAGING)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_none_or(process_alive) {
            continue;
        }
        if let Ok(id) = std::fs::read_to_string(entry.path().join(SCRATCH_NOTE)) {
            let id = id.trim();
            if uuid::Uuid::parse_str(id).is_ok() {
                // through the gate; a workspace already gone is fine
                let args = json!({"workspace_id": id});
                let _ = gated(host, "workspace_delete", args, true, false).await;
            }
        }
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

/// The `workspace_create` arguments of a run. A workspace name holds at most 200 characters,
/// as a title does: "pdf: " + the title, cut to fit (a title of 196-200 characters failed). It
/// is a scratch workspace when its results are copied out with `-o` and it is then removed: its
/// imports skip the syncs that were a third of the run (#39). Without `-o` it stays, and is
/// written like any other.
fn workspace_request(args: &PdfArgs) -> Value {
    let name: String = format!("pdf: {}", args.title()).chars().take(200).collect();
    json!({"name": name, "scratch": args.output.is_some()})
}

/// Stages, imports and builds; `scratch` gets the workspace id as soon as there is one.
async fn build(
    host: &Arc<Host>,
    args: &PdfArgs,
    preset: &str,
    staging_name: &str,
    scratch: &mut Option<String>,
) -> Result<Value> {
    let staging = host.paths().workspace_dir().join(staging_name);
    store::ensure_dir(&staging)?;
    let ws = gated(
        host,
        "workspace_create",
        workspace_request(args),
        true,
        false,
    )
    .await
    .into_result()?;
    let id = ws["workspace_id"].as_str().unwrap_or("").to_string();
    *scratch = Some(id.clone());
    // so a run killed from here on (SIGKILL, SIGTERM) is cleaned up by the next one
    std::fs::write(staging.join(SCRATCH_NOTE), &id).map_err(|e| Error::io(&staging, e))?;
    // Stage each file: a hard link where the file system allows (no copy), else a copy; each
    // in a folder of its own, so two files of one name stay apart and each keeps its name
    // (the manifest names the file a page came from).
    let mut staged = Vec::new();
    for (n, image) in args.images.iter().enumerate() {
        let name = staged_name(n, image);
        let own = staging.join(format!("{n:02}"));
        std::fs::create_dir(&own).map_err(|e| Error::io(&own, e))?;
        let to = staging.join(&name);
        // a file that cannot be read is bad input, as a damaged one is (exit 2 for both)
        let unreadable =
            |e: std::io::Error| Error::Usage(format!("cannot read {}: {e}", image.display()));
        // A symlink named on the command line is the person's way of naming its target: the
        // target is staged (a link to the link was refused as leading outside the roots).
        let source = std::fs::canonicalize(image).map_err(unreadable)?;
        // a FIFO or device would block or never end: only regular files are images
        if !std::fs::metadata(&source).is_ok_and(|m| m.is_file()) {
            return Err(Error::Usage(format!(
                "{} is not a regular file; name image files",
                image.display()
            )));
        }
        if std::fs::hard_link(&source, &to).is_err() {
            std::fs::copy(&source, &to).map_err(unreadable)?;
        }
        staged.push((image.clone(), format!("{staging_name}/{name}")));
    }
    // Imports check every image, so they run side by side; they take asset ids in the order
    // the files were given all the same.
    let _in_order = host
        .import_order()
        .expect(&id, staged.iter().map(|(_, path)| path.clone()).collect());
    // Two per core (while one import waits for its files to reach the disk, another computes),
    // as long as the memory they are expected to take together stays within a budget; the
    // next file in order always starts once nothing else runs.
    let limit = std::thread::available_parallelism()
        .map_or(2, |n| 2 * n.get())
        .clamp(2, 8);
    let mut in_flight = 0u64;
    let total = staged.len();
    let show = crate::text::terminal::is_terminal(crate::text::terminal::Stream::Err);
    let mut ids = vec![Value::Null; total];
    let mut pending = staged.into_iter().enumerate().peekable();
    let mut running = tokio::task::JoinSet::new();
    let mut done = 0;
    loop {
        while running.len() < limit {
            let Some((_, (_, path))) = pending.peek() else {
                break;
            };
            let weight = import_weight(&host.paths().workspace_dir().join(path));
            if !running.is_empty() && in_flight + weight > IMPORT_MEMORY {
                break;
            }
            let Some((i, (image, path))) = pending.next() else {
                break;
            };
            in_flight += weight;
            let (host, id) = (host.clone(), id.clone());
            running.spawn(async move {
                let args = json!({"workspace_id": id, "path": path});
                let r = gated(&host, "asset_import", args, true, false).await;
                (i, image, weight, r.into_result())
            });
        }
        let Some(finished) = running.join_next().await else {
            break;
        };
        let (i, image, weight, imported) =
            finished.map_err(|e| Error::tool("asset_import", e.to_string()))?;
        in_flight -= weight;
        let imported = match imported {
            Ok(v) => v,
            Err(e @ Error::Cancelled) => {
                while running.join_next().await.is_some() {}
                return Err(e);
            }
            Err(e) => {
                // The imports still running finish before the scratch workspace is removed
                // (one writing into it meanwhile left a half-deleted workspace behind).
                while running.join_next().await.is_some() {}
                // Name the file as it was given, not its staged copy.
                let staged = staging.join(staged_name(i, &image));
                let message = e
                    .to_string()
                    .replace(&staged.display().to_string(), &image.display().to_string());
                let shown = image.display().to_string();
                return Err(Error::Usage(if message.contains(&shown) {
                    message
                } else {
                    format!("{shown}: {message}")
                }));
            }
        };
        ids[i] = imported["asset_id"].clone();
        done += 1;
        if show {
            crate::text::terminal::clear_line(crate::text::terminal::Stream::Err);
            errw!("imported {done} of {total}");
        }
    }
    if show {
        crate::text::terminal::clear_line(crate::text::terminal::Stream::Err);
    }
    let request = json!({"workspace_id": id, "source_asset_ids": ids, "title": args.title(), "preset": preset});
    // Building is the person's own action here; the gate still applies its grants and modes.
    gated(host, "build_image_pdf", request, true, true)
        .await
        .into_result()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(output: Option<&str>, title: &str) -> PdfArgs {
        PdfArgs {
            images: vec![PathBuf::from("a.jpg")],
            title: Some(title.to_string()),
            preset: PresetArg::Portrait,
            output: output.map(PathBuf::from),
            force: false,
        }
    }

    /// Only a run that copies its results out (and then removes the workspace) imports into a
    /// scratch workspace; a kept one is synced like any other. The name fits in 200 characters.
    #[test]
    fn only_a_run_with_an_output_folder_uses_a_scratch_workspace() {
        let kept = workspace_request(&args(None, "t"));
        assert_eq!(kept, json!({"name": "pdf: t", "scratch": false}));
        let copied_out = workspace_request(&args(Some("out"), &"x".repeat(200)));
        assert_eq!(copied_out["scratch"], true);
        assert_eq!(copied_out["name"].as_str().unwrap().chars().count(), 200);
    }
}

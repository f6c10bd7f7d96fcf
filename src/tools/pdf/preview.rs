//! `preview.html`: the document's title and page order with thumbnails inline, so it opens
//! offline, anywhere, without the PDF.

use base64::Engine;

use super::prepare;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page: one figure per page (thumbnail and asset id), in order.
pub fn html(title: &str, preset: &str, pages: &[(u64, &[u8])]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut body = String::new();
    for (n, (asset, thumb)) in pages.iter().enumerate() {
        let img = if thumb.is_empty() {
            "<div class=\"missing\">no preview</div>".to_string()
        } else {
            format!(
                "<img src=\"data:{};base64,{}\" alt=\"page {}\">",
                prepare::thumb_media_type(thumb),
                b64.encode(thumb),
                n + 1
            )
        };
        body.push_str(&format!(
            "<figure>{img}<figcaption>page {} · asset {asset}</figcaption></figure>\n",
            n + 1
        ));
    }
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>body{{font-family:sans-serif;margin:2em}}figure{{display:inline-block;margin:0 1em 1em 0;text-align:center}}img{{max-width:{e}px;max-height:{e}px;box-shadow:0 0 4px #888}}</style></head>\n<body><h1>{t}</h1><p>{n} page(s), {preset}</p>\n{body}</body></html>\n",
        t = escape(title),
        e = prepare::THUMB_EDGE,
        n = pages.len(),
        preset = escape(preset),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_escaped_and_pages_keep_their_order() {
        let png = b"\x89PNG....".as_slice();
        let html = html("<b>&", "square", &[(7, png), (3, b"\xff\xd8".as_slice())]);
        assert!(html.contains("<title>&lt;b&gt;&amp;</title>"));
        let first = html.find("asset 7").unwrap();
        assert!(first < html.find("asset 3").unwrap());
        assert!(html.contains("data:image/png;base64,"));
        assert!(html.contains("data:image/jpeg;base64,"));
    }
}

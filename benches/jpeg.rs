//! Checking a JPEG at import: lmcp's entropy-only pass (every block Huffman-decoded, DC
//! picture kept, no pixel made) against jpeg-decoder decoding the same file at 1/8 scale (what
//! import did before) and in full, on a 6-megapixel photo-like 4:2:0 JPEG.
//!
//! Run with `cargo bench --bench jpeg`.

use criterion::{Criterion, criterion_group, criterion_main};

/// A 3000×2000 photo-like picture (smooth colour fields and fine noise), as a quality-85 JPEG.
fn photo() -> Vec<u8> {
    let (w, h) = (3000u32, 2000u32);
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let noise = (seed % 24) as u32;
        let base = [x * 255 / w, y * 255 / h, (x / 150 + y / 100) % 2 * 120 + 60];
        image::Rgb(base.map(|v| (v * 85 / 100 + noise) as u8))
    });
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 85)
        .encode_image(&img)
        .unwrap();
    out
}

fn bench(c: &mut Criterion) {
    let jpeg = photo();
    let mut group = c.benchmark_group("jpeg_6mp");
    group.sample_size(20);
    group.bench_function("lmcp_check", |b| {
        b.iter(|| lmcp::tools::pdf::huffman_jpeg::check(&jpeg).unwrap())
    });
    group.bench_function("jpeg_decoder_eighth", |b| {
        b.iter(|| {
            let mut d = jpeg_decoder::Decoder::new(std::io::Cursor::new(&jpeg));
            d.scale(375, 250).unwrap();
            d.decode().unwrap()
        })
    });
    group.bench_function("jpeg_decoder_full", |b| {
        b.iter(|| {
            jpeg_decoder::Decoder::new(std::io::Cursor::new(&jpeg))
                .decode()
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Writing a PDF object by object, so image data streams from disk into the file.
//!
//! The layout's few small objects (pages, content streams, info, catalog) are serialised as
//! they come (ISO 32000-1 §7.3 syntax, lopdf's object types), and the image streams are copied
//! in by the caller one at a time. A whole-document writer (printpdf's, which is lopdf's) holds
//! every image in memory and copies it again to serialise. The SHA-256 of the file is computed
//! on the way out, so memory does not grow with the document.

use std::collections::BTreeMap;
use std::io::{self, Write};

use lopdf::{Dictionary, Object, ObjectId, StringFormat};
use sha2::{Digest, Sha256};

/// Counts and hashes what passes through.
struct Hashing<W: Write> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A PDF being written front to back: objects in any order, then the cross-reference table.
pub struct PdfWriter<W: Write> {
    out: Hashing<W>,
    offsets: BTreeMap<u32, u64>,
    next_id: u32,
}

/// What writing produced.
pub struct Written<W> {
    /// The sink, flushed.
    pub inner: W,
    /// SHA-256 of every byte written, hex.
    pub sha256: String,
    /// Bytes written.
    pub bytes: u64,
}

impl<W: Write> PdfWriter<W> {
    /// Writes the header; object ids handed out by [`PdfWriter::new_id`] start after `max_id`.
    pub fn new(inner: W, version: &str, max_id: u32) -> io::Result<PdfWriter<W>> {
        let mut out = Hashing {
            inner,
            hasher: Sha256::new(),
            written: 0,
        };
        // The binary comment tells transfer tools the file is not text.
        out.write_all(format!("%PDF-{version}\n").as_bytes())?;
        out.write_all(b"%\xe2\xe3\xcf\xd3\n")?;
        Ok(PdfWriter {
            out,
            offsets: BTreeMap::new(),
            next_id: max_id + 1,
        })
    }

    /// The sink, for flushing or starting its write-back between objects.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out.inner
    }

    /// A fresh object id (for objects the layout did not have, like soft masks).
    pub fn new_id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn begin(&mut self, id: ObjectId) -> io::Result<()> {
        self.offsets.insert(id.0, self.out.written);
        writeln!(self.out, "{} {} obj", id.0, id.1)
    }

    /// Writes an object as lopdf serialises it.
    pub fn object(&mut self, id: ObjectId, object: &Object) -> io::Result<()> {
        self.begin(id)?;
        write_object(&mut self.out, object)?;
        self.out.write_all(b"\nendobj\n")
    }

    /// Writes a stream object whose `len` data bytes come from `body`; the dictionary's
    /// `/Length` is set here. Fails if `body` writes a different number of bytes.
    pub fn stream(
        &mut self,
        id: ObjectId,
        mut dict: Dictionary,
        len: u64,
        body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        dict.set("Length", Object::Integer(len as i64));
        self.begin(id)?;
        write_dict(&mut self.out, &dict)?;
        self.out.write_all(b"\nstream\n")?;
        let start = self.out.written;
        body(&mut self.out)?;
        let got = self.out.written - start;
        if got != len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "an image stream was {got} bytes where {len} were expected; its file changed while the PDF was written"
                ),
            ));
        }
        self.out.write_all(b"\nendstream\nendobj\n")
    }

    /// Writes the cross-reference table and trailer (`/Size` set here) and flushes.
    pub fn finish(mut self, mut trailer: Dictionary) -> io::Result<Written<W>> {
        let size = self.offsets.keys().last().map_or(1, |last| last + 1);
        let xref_at = self.out.written;
        let mut table = format!("xref\n0 {size}\n");
        // Free entries form a list: each names the next free object, the last names 0.
        let free: Vec<u32> = (1..size)
            .filter(|i| !self.offsets.contains_key(i))
            .collect();
        let next_free = |after: u32| free.iter().find(|f| **f > after).copied().unwrap_or(0);
        table.push_str(&format!("{:010} 65535 f \n", next_free(0)));
        for id in 1..size {
            match self.offsets.get(&id) {
                Some(offset) => table.push_str(&format!("{offset:010} 00000 n \n")),
                None => table.push_str(&format!("{:010} 00001 f \n", next_free(id))),
            }
        }
        self.out.write_all(table.as_bytes())?;
        trailer.set("Size", Object::Integer(size as i64));
        self.out.write_all(b"trailer\n")?;
        write_dict(&mut self.out, &trailer)?;
        write!(self.out, "\nstartxref\n{xref_at}\n%%EOF\n")?;
        self.out.flush()?;
        let Hashing {
            inner,
            hasher,
            written,
        } = self.out;
        Ok(Written {
            inner,
            sha256: format!("{:x}", hasher.finalize()),
            bytes: written,
        })
    }
}

/// Writes a direct object. A stream (a content stream in the layout) gets its `/Length`.
fn write_object(out: &mut dyn Write, object: &Object) -> io::Result<()> {
    match object {
        Object::Null => out.write_all(b"null"),
        Object::Boolean(b) => out.write_all(if *b { b"true" } else { b"false" }),
        Object::Integer(i) => write!(out, "{i}"),
        Object::Real(r) => write!(out, "{}", if r.is_finite() { *r } else { 0.0 }),
        Object::Name(n) => write_name(out, n),
        Object::String(text, StringFormat::Hexadecimal) => {
            out.write_all(b"<")?;
            for b in text {
                write!(out, "{b:02X}")?;
            }
            out.write_all(b">")
        }
        Object::String(text, StringFormat::Literal) => {
            out.write_all(b"(")?;
            for &b in text {
                match b {
                    b'(' | b')' | b'\\' => out.write_all(&[b'\\', b])?,
                    b'\r' => out.write_all(b"\\r")?,
                    _ => out.write_all(&[b])?,
                }
            }
            out.write_all(b")")
        }
        Object::Array(items) => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b" ")?;
                }
                write_object(out, item)?;
            }
            out.write_all(b"]")
        }
        Object::Dictionary(d) => write_dict(out, d),
        Object::Stream(s) => {
            let mut dict = s.dict.clone();
            dict.set("Length", Object::Integer(s.content.len() as i64));
            write_dict(out, &dict)?;
            out.write_all(b"\nstream\n")?;
            out.write_all(&s.content)?;
            out.write_all(b"\nendstream")
        }
        Object::Reference((id, generation)) => write!(out, "{id} {generation} R"),
    }
}

fn write_dict(out: &mut dyn Write, dict: &Dictionary) -> io::Result<()> {
    out.write_all(b"<<")?;
    for (key, value) in dict.iter() {
        write_name(out, key)?;
        out.write_all(b" ")?;
        write_object(out, value)?;
        out.write_all(b"\n")?;
    }
    out.write_all(b">>")
}

/// A name, with `#xx` for bytes that are delimiters, whitespace or outside printable ASCII.
fn write_name(out: &mut dyn Write, name: &[u8]) -> io::Result<()> {
    out.write_all(b"/")?;
    for &b in name {
        if b.is_ascii_graphic() && !b"#/()<>[]{}%".contains(&b) {
            out.write_all(&[b])?;
        } else {
            write!(out, "#{b:02X}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_file_loads_with_lopdf_and_hashes_what_was_written() {
        let mut w = PdfWriter::new(Vec::new(), "1.4", 3).unwrap();
        let catalog = Dictionary::from_iter(vec![
            ("Type", Object::Name(b"Catalog".to_vec())),
            ("Pages", Object::Reference((2, 0))),
        ]);
        let pages = Dictionary::from_iter(vec![
            ("Type", Object::Name(b"Pages".to_vec())),
            ("Kids", Object::Array(vec![])),
            ("Count", Object::Integer(0)),
        ]);
        w.object((1, 0), &Object::Dictionary(catalog)).unwrap();
        w.object((2, 0), &Object::Dictionary(pages)).unwrap();
        // Object 3 is left out on purpose: it must be listed as free.
        let extra = w.new_id();
        assert_eq!(extra, 4);
        w.stream((extra, 0), Dictionary::new(), 5, |out| {
            out.write_all(b"hello")
        })
        .unwrap();
        let done = w
            .finish(Dictionary::from_iter(vec![(
                "Root",
                Object::Reference((1, 0)),
            )]))
            .unwrap();
        assert_eq!(done.bytes as usize, done.inner.len());
        assert_eq!(done.sha256, format!("{:x}", Sha256::digest(&done.inner)));
        let doc = lopdf::Document::load_mem(&done.inner).unwrap();
        assert_eq!(doc.version, "1.4");
        let s = doc.get_object((4, 0)).unwrap().as_stream().unwrap();
        assert_eq!(s.content, b"hello");
        let text = String::from_utf8_lossy(&done.inner);
        assert!(text.contains("0000000003 65535 f \n"), "{text}");
        assert!(text.contains("0000000000 00001 f \n"), "{text}");
    }

    #[test]
    fn objects_serialise_so_lopdf_reads_them_back() {
        let value = Object::Dictionary(Dictionary::from_iter(vec![
            (
                "Title",
                Object::String(b"a (b) \\ c\rd".to_vec(), StringFormat::Literal),
            ),
            (
                "Hex",
                Object::String(vec![0, 255, 16], StringFormat::Hexadecimal),
            ),
            ("Odd Name", Object::Name(b"with space/#".to_vec())),
            (
                "List",
                Object::Array(vec![
                    Object::Integer(-3),
                    Object::Real(1.5),
                    Object::Boolean(true),
                    Object::Null,
                    Object::Reference((7, 0)),
                ]),
            ),
        ]));
        let mut w = PdfWriter::new(Vec::new(), "1.4", 0).unwrap();
        let id = w.new_id();
        w.object((id, 0), &value).unwrap();
        let root = Dictionary::from_iter(vec![("Type", Object::Name(b"Catalog".to_vec()))]);
        let rid = w.new_id();
        w.object((rid, 0), &Object::Dictionary(root)).unwrap();
        let done = w
            .finish(Dictionary::from_iter(vec![(
                "Root",
                Object::Reference((rid, 0)),
            )]))
            .unwrap();
        let doc = lopdf::Document::load_mem(&done.inner).unwrap();
        let back = doc.get_dictionary((id, 0)).unwrap();
        assert_eq!(
            back.get(b"Title").unwrap().as_str().unwrap(),
            b"a (b) \\ c\rd"
        );
        assert_eq!(back.get(b"Hex").unwrap().as_str().unwrap(), &[0, 255, 16]);
        assert_eq!(
            back.get(b"Odd Name").unwrap().as_name().unwrap(),
            b"with space/#"
        );
        let list = back.get(b"List").unwrap().as_array().unwrap();
        assert_eq!(list.len(), 5);
        assert_eq!(list[0].as_i64().unwrap(), -3);
        assert_eq!(list[4].as_reference().unwrap(), (7, 0));
    }

    #[test]
    fn a_stream_shorter_than_announced_is_an_error() {
        let mut w = PdfWriter::new(Vec::new(), "1.4", 0).unwrap();
        let id = w.new_id();
        let e = w
            .stream((id, 0), Dictionary::new(), 10, |out| {
                out.write_all(b"short")
            })
            .unwrap_err();
        assert!(e.to_string().contains("changed"), "{e}");
    }
}

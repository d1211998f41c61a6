//! Reading NDJSON for the importers as bytes, not as a UTF-8 stream: a line
//! that is not UTF-8, or longer than [`MAX_LINE`], is one bad line (reported
//! with its number and skipped), never the end of the import. Only a failing
//! read of the input itself ends it. Memory is bounded by one line.

use std::io::{self, BufRead};

/// The longest line an importer reads; the rest of a longer one is skipped unread.
pub const MAX_LINE: usize = 1 << 20;

/// One line of the input.
#[derive(Debug, PartialEq)]
pub struct Line {
    /// 1-based.
    pub number: usize,
    /// Bytes it took in the input, newline included (for progress bars).
    pub bytes: usize,
    /// The text, or why the line cannot be read as text.
    pub text: Result<String, String>,
}

/// The lines of `input`; an `Err` item is a failing read, after which nothing follows.
pub fn lines<R: BufRead>(input: R) -> Lines<R> {
    Lines {
        input,
        number: 0,
        failed: false,
    }
}

/// The lines of `input` until a read fails; the failure lands in `error`
/// (an importer reports it and imports what was read).
pub fn lines_until_error<'a, R: BufRead + 'a>(
    input: R,
    error: &'a mut Option<io::Error>,
) -> impl Iterator<Item = Line> + 'a {
    lines(input).map_while(move |l| match l {
        Ok(l) => Some(l),
        Err(e) => {
            *error = Some(e);
            None
        }
    })
}

/// One chunk of an importer's input: the records parsed, and the bad lines
/// (both with their line numbers).
pub type Chunk<T> = (Vec<(usize, T)>, Vec<(usize, String)>);

/// `lines` as chunks of up to `size` non-blank lines, each parsed by `parse`,
/// advancing `progress` by the bytes read.
pub fn chunks<'a, T, I, F>(
    lines: I,
    progress: &'a crate::progress::Progress,
    size: usize,
    parse: F,
) -> impl Iterator<Item = Chunk<T>> + 'a
where
    I: Iterator<Item = Line> + 'a,
    F: FnMut(&str) -> Result<T, String> + 'a,
{
    let (mut lines, mut parse) = (lines, parse);
    std::iter::from_fn(move || {
        let (mut good, mut bad) = (Vec::new(), Vec::new());
        for line in lines.by_ref() {
            progress.advance(line.bytes);
            match line.text {
                Err(reason) => bad.push((line.number, reason)),
                Ok(t) if t.trim().is_empty() => {}
                Ok(t) => match parse(&t) {
                    Ok(r) => good.push((line.number, r)),
                    Err(reason) => bad.push((line.number, reason)),
                },
            }
            if good.len() + bad.len() >= size {
                break;
            }
        }
        (!good.is_empty() || !bad.is_empty()).then_some((good, bad))
    })
}

pub struct Lines<R> {
    input: R,
    number: usize,
    failed: bool,
}

impl<R: BufRead> Lines<R> {
    fn read_line(&mut self) -> io::Result<Option<Line>> {
        let mut buf = Vec::new();
        let mut bytes = 0usize;
        let mut too_long = false;
        loop {
            let available = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                if bytes == 0 {
                    return Ok(None);
                }
                break;
            }
            let (piece, used, done) = match available.iter().position(|b| *b == b'\n') {
                Some(i) => (&available[..i], i + 1, true),
                None => (available, available.len(), false),
            };
            if !too_long {
                if buf.len() + piece.len() > MAX_LINE {
                    too_long = true;
                    buf = Vec::new();
                } else {
                    buf.extend_from_slice(piece);
                }
            }
            bytes += used;
            self.input.consume(used);
            if done {
                break;
            }
        }
        self.number += 1;
        let text = if too_long {
            Err(format!("the line is longer than {MAX_LINE} bytes"))
        } else {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            String::from_utf8(buf).map_err(|e| {
                format!(
                    "the line is not valid UTF-8 (at byte {})",
                    e.utf8_error().valid_up_to() + 1
                )
            })
        };
        Ok(Some(Line {
            number: self.number,
            bytes,
            text,
        }))
    }
}

impl<R: BufRead> Iterator for Lines<R> {
    type Item = io::Result<Line>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.read_line() {
            Ok(l) => l.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(input: &[u8]) -> Vec<(usize, Result<String, String>)> {
        lines(input)
            .map(|l| l.unwrap())
            .map(|l| (l.number, l.text))
            .collect()
    }

    #[test]
    fn a_line_that_is_not_utf8_is_one_bad_line_among_good_ones() {
        let got = texts(b"{\"a\":1}\r\n{\"b\":\"U\xff\"}\n\n{\"c\":3}");
        assert_eq!(got[0], (1, Ok("{\"a\":1}".into())));
        assert_eq!(got[1].0, 2);
        assert!(got[1].1.as_ref().unwrap_err().contains("UTF-8"));
        assert_eq!(got[2], (3, Ok(String::new())));
        assert_eq!(got[3], (4, Ok("{\"c\":3}".into())));
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn an_overlong_line_is_skipped_without_being_kept() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\nok\n");
        // A small buffer: the long line arrives in many pieces.
        let got: Vec<Line> = lines(io::BufReader::with_capacity(4096, &input[..]))
            .map(|l| l.unwrap())
            .collect();
        assert!(got[0].text.as_ref().unwrap_err().contains("longer"));
        assert_eq!(got[0].bytes, MAX_LINE + 11);
        assert_eq!(got[1].text, Ok("ok".into()));
    }
}

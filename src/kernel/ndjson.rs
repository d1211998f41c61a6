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

/// Longest reason kept for a bad line: a reason may quote the line (an
/// unknown field's name, a row kind), and a line may be 1 MiB.
const MAX_REASON_BYTES: usize = 300;

fn shortened(mut reason: String) -> String {
    if reason.len() > MAX_REASON_BYTES {
        let mut end = MAX_REASON_BYTES;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
        reason.push('…');
    }
    reason
}

/// The bad lines of an import: each one counted, the first [`BadLines::KEPT`]
/// kept with their reasons (each at most 300 bytes), so that a file of
/// millions of bad lines does not grow the importer's memory with them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BadLines {
    kept: Vec<(usize, String)>,
    count: usize,
}

impl BadLines {
    pub const KEPT: usize = 1_000;

    /// Counts a bad line (1-based number, 0 for the input as a whole).
    pub fn push(&mut self, line: (usize, String)) {
        self.count += 1;
        if self.kept.len() < Self::KEPT {
            self.kept.push((line.0, shortened(line.1)));
        }
    }

    /// Every bad line, kept or not.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bad lines counted but whose reasons were not kept.
    pub fn dropped(&self) -> usize {
        self.count - self.kept.len()
    }

    /// Orders the kept lines by line number.
    pub fn sort(&mut self) {
        self.kept.sort();
    }
}

impl Extend<(usize, String)> for BadLines {
    fn extend<T: IntoIterator<Item = (usize, String)>>(&mut self, lines: T) {
        for l in lines {
            self.push(l);
        }
    }
}

/// The kept lines.
impl std::ops::Deref for BadLines {
    type Target = [(usize, String)];

    fn deref(&self) -> &Self::Target {
        &self.kept
    }
}

/// `lines` as chunks of up to `size` non-blank lines, each parsed by `parse`,
/// advancing `progress` by the bytes read.
pub fn chunks<'a, T, I, F>(
    lines: I,
    progress: &'a crate::kernel::progress::Progress,
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
                Err(reason) => bad.push((line.number, shortened(reason))),
                Ok(t) if t.trim().is_empty() => {}
                Ok(t) => match parse(&t) {
                    Ok(r) => good.push((line.number, r)),
                    Err(reason) => bad.push((line.number, shortened(reason))),
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
    fn bad_lines_are_all_counted_and_the_first_kept() {
        let mut bad = BadLines::default();
        bad.extend((1..=BadLines::KEPT + 500).map(|n| (n, "x".repeat(1000))));
        assert_eq!(bad.len(), BadLines::KEPT + 500);
        assert_eq!(bad.iter().count(), BadLines::KEPT);
        assert_eq!(bad.dropped(), 500);
        assert!(bad.iter().all(|(_, r)| r.len() <= MAX_REASON_BYTES + 3));
    }

    #[test]
    fn a_reason_that_quotes_a_long_line_is_shortened() {
        let long = format!("{{\"{}é\":1}}", "a".repeat(299));
        let progress = crate::kernel::progress::Progress::start(long.len());
        let parsed: Vec<_> = chunks(
            lines(long.as_bytes()).map(|l| l.unwrap()),
            &progress,
            10,
            |t| Err::<(), _>(format!("unknown field {t}")),
        )
        .collect();
        let reason = &parsed[0].1[0].1;
        assert!(
            reason.len() <= MAX_REASON_BYTES + '…'.len_utf8(),
            "{}",
            reason.len()
        );
        assert!(reason.starts_with("unknown field {\"aaa") && reason.ends_with('…'));
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

    use proptest::prelude::*;

    /// Input bytes: mostly text with newlines, carriage returns and bytes
    /// that are not UTF-8 (a lone continuation byte, a cut-off sequence).
    fn input() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            4 => "[a-z{}\":, ]{0,12}".prop_map(String::into_bytes),
            2 => Just(b"\n".to_vec()),
            1 => Just(b"\r\n".to_vec()),
            1 => Just(b"\r".to_vec()),
            1 => any::<String>().prop_map(String::into_bytes),
            1 => prop::sample::select(vec![vec![0xff], vec![0x80], vec![0xe2, 0x82], vec![0xc3]]),
            1 => prop::collection::vec(any::<u8>(), 0..8),
        ];
        prop::collection::vec(piece, 0..24).prop_map(|p| p.concat())
    }

    /// A reader that hands out its bytes `step` at a time, then fails (or ends).
    struct Trickle {
        bytes: Vec<u8>,
        at: usize,
        step: usize,
        fail_at: Option<usize>,
    }

    impl io::Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let end = self
                .fail_at
                .unwrap_or(self.bytes.len())
                .min(self.bytes.len());
            if self.at >= end && self.fail_at.is_some() {
                return Err(io::Error::other("the disk went away"));
            }
            let n = self.step.min(buf.len()).min(end - self.at);
            buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn trickle(bytes: &[u8], step: usize, fail_at: Option<usize>) -> io::BufReader<Trickle> {
        io::BufReader::with_capacity(
            step,
            Trickle {
                bytes: bytes.to_vec(),
                at: 0,
                step,
                fail_at,
            },
        )
    }

    /// What each line should be: split at `\n`, one `\r` before it dropped.
    fn expected(input: &[u8]) -> Vec<(usize, Option<String>)> {
        let mut segments: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
        if segments.last().is_some_and(|s| s.is_empty()) {
            segments.pop();
        }
        segments
            .into_iter()
            .map(|s| {
                let text = s.strip_suffix(b"\r").unwrap_or(s);
                (s.len(), String::from_utf8(text.to_vec()).ok())
            })
            .collect()
    }

    proptest! {
        #![proptest_config(crate::kernel::proptest_config())]

        /// Any bytes: one line per newline (and one for an unterminated
        /// rest), numbered from 1, text exactly when it is UTF-8, and every
        /// byte counted once, however the reader hands them out.
        #[test]
        fn any_bytes_split_into_numbered_lines(bytes in input(), step in 1usize..40) {
            let got: Vec<Line> = lines(trickle(&bytes, step, None)).map(|l| l.unwrap()).collect();
            let want = expected(&bytes);
            prop_assert_eq!(got.len(), want.len());
            let newlines = bytes.iter().filter(|b| **b == b'\n').count();
            prop_assert_eq!(got.iter().map(|l| l.bytes).sum::<usize>(), bytes.len());
            prop_assert_eq!(got.len(), newlines + usize::from(!bytes.is_empty() && !bytes.ends_with(b"\n")));
            for (i, (line, (len, text))) in got.iter().zip(want).enumerate() {
                prop_assert_eq!(line.number, i + 1);
                prop_assert_eq!(line.bytes, len + usize::from(i < newlines));
                match (&line.text, text) {
                    (Ok(t), Some(w)) => prop_assert_eq!(t, &w),
                    (Err(reason), None) => prop_assert!(reason.contains("UTF-8"), "{reason}"),
                    (got, want) => prop_assert!(false, "line {}: {got:?}, expected {want:?}", i + 1),
                }
            }
        }

        #[test]
        fn lines_of_text_read_back_as_written(
            texts in prop::collection::vec("[^\n\r]{0,20}", 0..12),
            crlf in any::<bool>(),
            last_newline in any::<bool>(),
        ) {
            let sep = if crlf { "\r\n" } else { "\n" };
            let mut input = texts.join(sep);
            if last_newline && !texts.is_empty() {
                input.push_str(sep);
            }
            let got: Vec<String> = lines(input.as_bytes())
                .map(|l| l.unwrap().text.unwrap())
                .collect();
            // An empty last text without its newline leaves nothing to read.
            let mut want = texts;
            if !last_newline && want.last().is_some_and(String::is_empty) {
                want.pop();
            }
            prop_assert_eq!(got, want);
        }

        /// A failing read ends the lines, reported once; every line read
        /// before it is intact.
        #[test]
        fn a_failing_read_ends_the_lines_after_what_was_read(
            bytes in input(), step in 1usize..40, cut in any::<prop::sample::Index>(),
        ) {
            let fail_at = cut.index(bytes.len() + 1);
            let mut error = None;
            let got: Vec<Line> = lines_until_error(trickle(&bytes, step, Some(fail_at)), &mut error).collect();
            prop_assert!(error.is_some());
            let read = got.iter().map(|l| l.bytes).sum::<usize>();
            prop_assert!(read <= fail_at);
            // Complete lines before the failure are as they would be without it.
            let whole: Vec<Line> = lines(&bytes[..]).map(|l| l.unwrap()).collect();
            for (g, w) in got.iter().zip(&whole) {
                prop_assert_eq!(g, w);
            }
        }

        /// Every non-blank line ends up parsed or reported exactly once, in
        /// order, in chunks of at most `size`.
        #[test]
        fn chunks_hold_every_non_blank_line_once(bytes in input(), size in 1usize..6) {
            let progress = crate::kernel::progress::Progress::start(bytes.len());
            let parse = |t: &str| {
                serde_json::from_str::<serde_json::Value>(t).map_err(|e| e.to_string())
            };
            let mut seen = Vec::new();
            let read = lines(&bytes[..]).map(|l| l.unwrap());
            for (good, bad) in chunks(read, &progress, size, parse) {
                prop_assert!(!good.is_empty() || !bad.is_empty());
                prop_assert!(good.len() + bad.len() <= size);
                let mut numbers: Vec<usize> =
                    good.iter().map(|(n, _)| *n).chain(bad.iter().map(|(n, _)| *n)).collect();
                numbers.sort_unstable();
                seen.extend(numbers);
            }
            progress.finish();
            let want: Vec<usize> = lines(&bytes[..])
                .map(|l| l.unwrap())
                .filter(|l| l.text.as_ref().map_or(true, |t| !t.trim().is_empty()))
                .map(|l| l.number)
                .collect();
            prop_assert_eq!(seen, want);
        }
    }
}

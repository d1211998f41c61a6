//! The importers' input: any bytes split into lines (every byte counted
//! once, however the reader hands them out), each line through the three
//! line parsers (vocabulary, assignments, image suggestions).
#![no_main]

use std::io::BufReader;

use kartei::kernel::ndjson::lines;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&capacity, input)) = data.split_first() else {
        return;
    };
    let reader = BufReader::with_capacity(usize::from(capacity).max(1), input);
    let mut counted = 0;
    for (i, line) in lines(reader).enumerate() {
        let line = line.expect("reading a slice never fails");
        assert_eq!(line.number, i + 1);
        counted += line.bytes;
        let Ok(text) = line.text else { continue };
        assert!(!text.contains('\n'));
        let _ = kartei::domains::themes::import::parse(&text);
        let _ = kartei::domains::assignments::import::parse(&text);
        if let Ok(kartei::domains::suggestions::service::Record::Suggestion(s)) =
            kartei::domains::suggestions::import::parse(&text)
        {
            assert!(s.page_id >= 0 && (0.0..=1.0).contains(&s.confidence));
        }
    }
    assert_eq!(counted, input.len());
});

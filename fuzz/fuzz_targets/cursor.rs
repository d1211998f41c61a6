//! `after` arguments: any text is a cursor or BAD_CURSOR; a cursor read
//! back is spelt one way and reads back as itself.
#![no_main]

use kartei::store::Cursor;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(cursor) = Cursor::decode(text) {
        let again = cursor.encode();
        assert_eq!(Cursor::decode(&again).ok(), Some(cursor), "{text:?}");
    }
    // The same text as the server would write it, after the version.
    if let Ok(cursor) = Cursor::decode(&format!("1.{text}")) {
        assert_eq!(Cursor::decode(&cursor.encode()).ok(), Some(cursor));
    }
});

//! The jobs table and a job's record.

use time::OffsetDateTime;

use crate::store::{Table, record, table};

table! {
    /// Jobs by the month they started in, newest first. A month holds the
    /// jobs operators started in it (tens to hundreds), each row a few KiB
    /// at most (`MAX_KEPT_LINES` lines of `MAX_LINE` bytes, twice).
    pub JOBS: Themes.jobs
        partition(month: Text)
        clustering(id: Text Desc)
        columns(
            kind: Text,
            state: Text,
            started_by: Text,
            input: Text,
            started_at: Text,
            ended_at: Text,
            touched: Text,
            host: Text,
            pid: Int,
            bytes_read: BigInt,
            bytes_total: BigInt,
            error_count: BigInt,
            errors: TextList,
            result: TextList,
            exit_code: Int,
        )
}

pub static TABLES: &[&Table] = &[&JOBS];

/// Bad lines and result lines a record keeps (the first bad lines, the
/// last result lines); the terminal that ran the command saw them all.
pub const MAX_KEPT_LINES: usize = 20;
/// Bytes of one kept line, at most.
pub const MAX_LINE: usize = 500;

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, async_graphql::Enum)]
pub enum JobState {
    /// Its process is working on it (and says so every few seconds).
    Running,
    /// It ended with exit status 0.
    Done,
    /// It ended with another exit status (bad lines, a dataset not
    /// published), or with an error.
    Failed,
    /// The command that handed it over went away (Ctrl-C): nothing of a
    /// cancelled dataset import is visible.
    Cancelled,
    /// Its process died while it ran. What an import wrote before stays
    /// (run it again: rows already present are skipped); a dataset import
    /// is never visible.
    Interrupted,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Interrupted => "interrupted",
        }
    }

    pub fn parse(s: &str) -> Option<JobState> {
        [
            JobState::Running,
            JobState::Done,
            JobState::Failed,
            JobState::Cancelled,
            JobState::Interrupted,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}

crate::store::text_cell!(JobState);

record! {
    /// A job as recorded.
    #[derive(Clone, Debug, PartialEq)]
    pub struct JobRecord in JOBS (from_row -> Option) {
        /// The month it started in (`2026-12`, from its id): its partition.
        pub month: String,
        /// Its start in milliseconds since the epoch (13 digits, so ids sort
        /// by time) and a random part: `1796000000000-1f2e3d4c`.
        pub id: String,
        /// The command's name, e.g. `import-suggestions`.
        pub kind: String,
        pub state: JobState,
        /// The token's subject over HTTP, `local:<user>` on the server's machine.
        pub started_by: String,
        /// The input's name as the operator gave it.
        pub input: Option<String>,
        pub started_at: String,
        pub ended_at: Option<String>,
        /// The last sign of life of the process running it.
        pub touched: String,
        pub host: String,
        pub pid: i32,
        pub bytes_read: i64,
        pub bytes_total: Option<i64>,
        pub error_count: i64,
        /// The first bad lines, `input:line: reason`.
        pub errors: Vec<String>,
        /// The last lines it said: its summary, or what it listed.
        pub result: Vec<String>,
        pub exit_code: Option<i32>,
    }
}

/// A new job's id at `now`.
pub fn new_id(now: OffsetDateTime) -> String {
    let ms = now.unix_timestamp_nanos() / 1_000_000;
    format!("{ms:013}-{}", crate::kernel::random_id(8))
}

/// The partition (`2026-12`) of a job id, from its start time; the month
/// of the epoch for an id that is not one of ours (it finds nothing).
pub fn month_of(id: &str) -> String {
    let ms = id
        .get(..13)
        .and_then(|d| d.parse::<i128>().ok())
        .unwrap_or(0);
    month(OffsetDateTime::from_unix_timestamp_nanos(ms * 1_000_000).unwrap_or(OffsetDateTime::UNIX_EPOCH))
}

/// The partition of the month `t` is in.
pub fn month(t: OffsetDateTime) -> String {
    format!("{:04}-{:02}", t.year(), u8::from(t.month()))
}

/// A line cut to `MAX_LINE` bytes on a character boundary.
pub fn kept(line: &str) -> String {
    if line.len() <= MAX_LINE {
        return line.to_owned();
    }
    let mut end = MAX_LINE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_sorts_by_time_and_names_its_month() {
        let t = OffsetDateTime::from_unix_timestamp(1_796_000_000).unwrap();
        let a = new_id(t);
        let b = new_id(t + time::Duration::milliseconds(1));
        assert!(a < b);
        assert_eq!(month_of(&a), "2026-11");
        assert_eq!(month_of("nonsense"), "1970-01");
    }

    #[test]
    fn a_kept_line_is_cut_on_a_character_boundary() {
        let long = "ä".repeat(MAX_LINE);
        let k = kept(&long);
        assert!(k.len() <= MAX_LINE + "…".len());
        assert!(k.ends_with('…'));
        assert_eq!(kept("short"), "short");
    }
}

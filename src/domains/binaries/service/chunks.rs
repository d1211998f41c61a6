//! Writing a byte stream into chunk rows of an original, hashing as it goes,
//! and refusing what is too large or no image at all as soon as that shows.

use sha2::{Digest, Sha256};

use super::*;
use crate::domains::binaries::imaging;
use crate::domains::binaries::model::*;
use crate::kernel::error::ApiError;
use crate::store::{Mutation, Row};

pub(super) struct Received {
    pub(super) size: u64,
    pub(super) parts: i32,
    pub(super) checksum: String,
    pub(super) head: Vec<u8>,
}

/// Writes a byte stream into chunk rows of `original_id`, hashing as it goes.
pub(super) struct ChunkWriter<'a> {
    pub(super) binaries: &'a Binaries,
    pub(super) original_id: String,
    pub(super) buf: Vec<u8>,
    pub(super) parts: i32,
    pub(super) size: u64,
    pub(super) hasher: Sha256,
    pub(super) head: Vec<u8>,
}

impl<'a> ChunkWriter<'a> {
    pub(super) fn new(binaries: &'a Binaries, original_id: &str) -> Self {
        ChunkWriter {
            binaries,
            original_id: original_id.to_owned(),
            // Grown as bytes come: most bodies are far smaller than a chunk,
            // and a chunk-sized buffer per body in flight was a fresh
            // mapping for the allocator each time (and held a MiB per
            // record waiting for the writer).
            buf: Vec::new(),
            parts: 0,
            size: 0,
            hasher: Sha256::new(),
            head: Vec::new(),
        }
    }

    /// Adds bytes; `Err(limit)` once the total passes the size limit.
    pub(super) async fn push(&mut self, mut data: &[u8]) -> Result<(), WriteError> {
        self.size += data.len() as u64;
        if self.size > self.binaries.inner.config.max_bytes {
            return Err(WriteError::TooLarge);
        }
        if self.head.len() < 64 {
            let n = (64 - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            // Refuse what is not an image from its first bytes, not after storing all of it.
            if self.head.len() == 64 && imaging::sniff(&self.head).is_none() {
                return Err(WriteError::NotAnImage);
            }
        }
        self.hasher.update(data);
        while !data.is_empty() {
            if self.buf.is_empty() && self.parts > 0 {
                // A later chunk of a large body: it will likely fill.
                self.buf.reserve_exact(CHUNK);
            }
            let n = (CHUNK - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.buf.len() == CHUNK {
                self.flush().await?;
            }
        }
        Ok(())
    }

    pub(super) async fn flush(&mut self) -> Result<(), WriteError> {
        // The next chunk's buffer is made when its bytes come (`push`): a
        // body's last flush leaves nothing allocated behind it.
        let data = std::mem::take(&mut self.buf);
        self.binaries
            .inner
            .store
            .apply(vec![Mutation::upsert(
                Row::new(&ORIGINALS_DATA)
                    .set("original_id", &self.original_id)
                    .set("part", self.parts)
                    .set("data", data),
            )])
            .await
            .map_err(|e| WriteError::Store(e.into()))?;
        self.parts += 1;
        Ok(())
    }

    pub(super) async fn finish(mut self) -> Result<Received, WriteError> {
        if !self.buf.is_empty() {
            self.flush().await?;
        }
        Ok(self.received())
    }

    /// As [`Self::finish`], but a body that fits one chunk is not written:
    /// its bytes come back, to be written with its derivatives in one call
    /// (and scaled without reading them back).
    pub(super) async fn finish_unwritten(
        mut self,
    ) -> Result<(Received, Option<Vec<u8>>), WriteError> {
        if self.parts > 0 || self.buf.is_empty() {
            return self.finish().await.map(|r| (r, None));
        }
        let bytes = std::mem::take(&mut self.buf);
        self.parts = 1;
        Ok((self.received(), Some(bytes)))
    }

    fn received(self) -> Received {
        Received {
            size: self.size,
            parts: self.parts,
            checksum: hex(&self.hasher.finalize()),
            head: self.head,
        }
    }
}

pub(super) enum WriteError {
    TooLarge,
    NotAnImage,
    Store(ApiError),
}

pub(super) const NOT_AN_IMAGE: &str =
    "not an image in a supported format (JPEG, PNG, WebP, GIF, TIFF)";

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

//! Runs of plain batches for the replayer (`replayer._LogCopies.add_run`): when a log segment is read with
//! `records_for` (`kraft-replay acls PATH`), most batches keep no record (NoOps, topic and partition records), and
//! the replayer needs only their header numbers. Consecutive such batches come out together as columns of
//! numbers instead of a `Batch` object each. A run's batches follow each other in the file, in offsets and in one
//! leader epoch (a batch that does not starts the next run).

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::decode::RBatch;
use crate::{Gather, State, Taken};

/// At most this many batches in one run: a run's lists take about 300 bytes a batch in Python, so this bounds
/// what reading a segment holds at once (`tests/kafka/test_replayer_memory.py`).
pub const MAX_RUN: usize = 1024;

#[derive(Default)]
pub struct Run {
    positions: Vec<i64>,
    sizes: Vec<i64>,
    bases: Vec<i64>,
    lasts: Vec<i128>,
    epochs: Vec<i32>,
    times: Vec<i64>,
}

impl Run {
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether `b` can go into a run: no record kept, its CRC matches and its record count, at least one, is its
    /// header's span of offsets (what `replayer._plain_selection` requires of a batch without records; a batch of
    /// no record, which no row holds, stays out; the caller also keeps a batch that follows a problem out, as the
    /// problem may be about it).
    pub fn takes(b: &RBatch) -> bool {
        let h = &b.header;
        b.records.is_empty()
            && h.crc_ok
            && h.records_count > 0
            && h.records_count as i64 == h.last_offset_delta as i64 + 1
    }

    pub fn add(&mut self, b: &RBatch) {
        let h = &b.header;
        self.positions.push(h.position);
        self.sizes.push(h.batch_length as i64 + 12);
        self.bases.push(h.base_offset);
        self.lasts.push(h.last_offset());
        self.epochs.push(h.leader_epoch);
        self.times.push(h.max_timestamp);
    }

    /// Whether `b` goes on this run: it starts where the last batch ends, at the next offset, in the same epoch.
    pub fn continues(&self, b: &RBatch) -> bool {
        let h = &b.header;
        let n = self.len();
        n == 0
            || (h.position == self.positions[n - 1] + self.sizes[n - 1]
                && h.base_offset as i128 == self.lasts[n - 1] + 1
                && h.leader_epoch == self.epochs[n - 1])
    }

    /// `(positions, sizes, base offsets, last offsets, leader epochs, append times)` as lists, and a fresh run.
    pub fn take(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        let r = std::mem::take(self);
        let columns = (
            PyList::new(py, r.positions)?,
            PyList::new(py, r.sizes)?,
            PyList::new(py, r.bases)?,
            PyList::new(py, r.lasts)?,
            PyList::new(py, r.epochs)?,
            PyList::new(py, r.times)?,
        );
        Ok(columns.into_pyobject(py)?.into_any().unbind())
    }
}

/// `Decoder`'s gatherer: runs of the batches `Run::takes` (when asked for), broken where a batch does not continue
/// the run and at `MAX_RUN` batches.
pub struct Runs {
    enabled: bool,
    run: Run,
}

impl Runs {
    pub fn new(enabled: bool) -> Runs {
        Runs { enabled, run: Run::default() }
    }
}

impl Gather for Runs {
    fn gather(&mut self, py: Python<'_>, _st: &State, b: &RBatch, after_problem: bool) -> PyResult<Taken> {
        if !self.enabled || after_problem || !Run::takes(b) {
            return Ok(Taken::No);
        }
        if !self.run.continues(b) {
            let out = self.run.take(py)?;
            self.run.add(b);
            return Ok(Taken::Out(out));
        }
        self.run.add(b);
        if self.run.len() >= MAX_RUN {
            return Ok(Taken::Out(self.run.take(py)?));
        }
        Ok(Taken::Yes)
    }

    fn is_empty(&self) -> bool {
        self.run.len() == 0
    }

    fn take(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        self.run.take(py)
    }
}

//! Points as columns, as block decoding fills them and queries read them.

use crate::value::Value;

/// Points as columns: timestamps (ms), and the values as integers while every one is an
/// integer, as f64s while every one is a float, and as [`Value`]s once the series holds both,
/// so that every value keeps its type and its bits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PointColumns {
    pub(crate) ts: Vec<i64>,
    /// The values while `kind` is `Ints`.
    pub(crate) ints: Vec<i64>,
    /// The values while `kind` is `Floats`.
    pub(crate) floats: Vec<f64>,
    /// The values once `kind` is `Mixed`.
    pub(crate) mixed: Vec<Value>,
    pub(crate) kind: ColumnKind,
}

/// Which of [`PointColumns`]' value columns holds the values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ColumnKind {
    /// Every value is an integer (also the kind of no value).
    #[default]
    Ints,
    /// Every value is a float.
    Floats,
    /// Both kinds.
    Mixed,
}

/// The values of [`PointColumns`], as long as its timestamps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueColumn<'a> {
    /// Every value is an integer.
    Ints(&'a [i64]),
    /// Every value is a float.
    Floats(&'a [f64]),
    /// Integers and floats, each as it was written.
    Mixed(&'a [Value]),
}

impl PointColumns {
    /// The timestamps in ms.
    pub fn ts(&self) -> &[i64] {
        &self.ts
    }

    /// The values.
    pub fn values(&self) -> ValueColumn<'_> {
        match self.kind {
            ColumnKind::Ints => ValueColumn::Ints(&self.ints),
            ColumnKind::Floats => ValueColumn::Floats(&self.floats),
            ColumnKind::Mixed => ValueColumn::Mixed(&self.mixed),
        }
    }

    /// The number of points.
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    /// True if there is no point.
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// The point at `i`, its value as it was written.
    pub fn get(&self, i: usize) -> Option<(i64, Value)> {
        let t = *self.ts.get(i)?;
        let v = match self.values() {
            ValueColumn::Ints(v) => Value::Int(*v.get(i)?),
            ValueColumn::Floats(v) => Value::Float(*v.get(i)?),
            ValueColumn::Mixed(v) => *v.get(i)?,
        };
        Some((t, v))
    }

    /// Appends a point.
    pub fn push(&mut self, ts: i64, value: Value) {
        self.ts.push(ts);
        let kind = if value.is_float() {
            ColumnKind::Floats
        } else {
            ColumnKind::Ints
        };
        self.prepare(kind, 1);
        match (self.kind, value) {
            (ColumnKind::Ints, Value::Int(i)) => self.ints.push(i),
            (ColumnKind::Floats, Value::Float(f)) => self.floats.push(f),
            (_, v) => self.mixed.push(v),
        }
    }

    /// Readies the columns for `n` values of kind `want` whose timestamps were just appended:
    /// takes that kind when there were no values before them, and moves the values present
    /// to the mixed column when they are of another kind.
    pub(crate) fn prepare(&mut self, want: ColumnKind, n: usize) {
        let have = self.ts.len() - n;
        if self.kind == want || self.kind == ColumnKind::Mixed && have > 0 {
            return;
        }
        if have == 0 {
            self.kind = want;
            return;
        }
        self.mixed.clear();
        self.mixed.reserve(have + n);
        match self.kind {
            ColumnKind::Ints => self.mixed.extend(self.ints.drain(..).map(Value::Int)),
            _ => self.mixed.extend(self.floats.drain(..).map(Value::Float)),
        }
        self.kind = ColumnKind::Mixed;
    }

    pub(crate) fn truncate(&mut self, len: usize) {
        self.ts.truncate(len);
        self.ints.truncate(len);
        self.floats.truncate(len);
        self.mixed.truncate(len);
    }

    pub(crate) fn clear(&mut self) {
        self.truncate(0);
        self.kind = ColumnKind::Ints;
    }

    pub(crate) fn reserve(&mut self, n: usize) {
        self.ts.reserve(n);
        match self.kind {
            ColumnKind::Ints => self.ints.reserve(n),
            ColumnKind::Floats => self.floats.reserve(n),
            ColumnKind::Mixed => self.mixed.reserve(n),
        }
    }
}

//! Decoded items as the Python objects of `replay/kafka/model.py` (`Batch`, `BatchHeader`, `Record`, `Problem`).
//! The dataclasses use `__slots__`: instances are allocated with the type's `tp_alloc` and their slots filled
//! directly (what `object.__setattr__` does, without a call per field), so `__init__` is not run.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};

use crate::decode::{Prob, RBatch, Rec};
use crate::json::uuid_text;
use crate::schema::{HashMap, Schemas};
use crate::value::{StructVal, Value};

#[repr(C)]
struct MemberDescr {
    d_common: ffi::PyDescrObject,
    d_member: *mut ffi::PyMemberDef,
}

/// A slots class: its type and the byte offset of each slot, in the order the caller asks for them.
pub struct SlotClass {
    cls: Py<PyType>,
    offsets: Vec<isize>,
}

impl SlotClass {
    pub fn new(cls: &Bound<'_, PyType>, names: &[&str]) -> PyResult<SlotClass> {
        let slots: Vec<String> = cls.getattr("__slots__")?.extract()?;
        let mut offsets = Vec::new();
        for name in names {
            if !slots.iter().any(|s| s == name) {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!("{} has no slot {}", cls.name()?, name)));
            }
            let descr = cls.getattr("__dict__")?.get_item(*name)?;
            let tname = descr.get_type().name()?.to_string();
            if tname != "member_descriptor" {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!("{}.{} is not a slot", cls.name()?, name)));
            }
            let offset = unsafe { (*(*(descr.as_ptr() as *mut MemberDescr)).d_member).offset };
            offsets.push(offset);
        }
        if offsets.len() != slots.len() {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "{} has {} slots, the decoder fills {}",
                cls.name()?,
                slots.len(),
                offsets.len()
            )));
        }
        Ok(SlotClass { cls: cls.clone().unbind(), offsets })
    }

    /// A new instance with every slot set from `values` (references are stolen).
    pub unsafe fn make(&self, py: Python<'_>, values: &[*mut ffi::PyObject]) -> PyResult<PyObject> {
        debug_assert_eq!(values.len(), self.offsets.len());
        let tp = self.cls.as_ptr() as *mut ffi::PyTypeObject;
        let alloc = (*tp).tp_alloc.unwrap_or(ffi::PyType_GenericAlloc);
        let obj = alloc(tp, 0);
        if obj.is_null() {
            for v in values {
                ffi::Py_XDECREF(*v);
            }
            return Err(PyErr::fetch(py));
        }
        for (v, off) in values.iter().zip(&self.offsets) {
            let slot = (obj as *mut u8).offset(*off) as *mut *mut ffi::PyObject;
            *slot = *v;
        }
        Ok(PyObject::from_owned_ptr(py, obj))
    }
}

pub struct PyOut {
    pub batch: SlotClass,
    pub header: SlotClass,
    pub record: SlotClass,
    pub problem: SlotClass,
    pub kinds: HashMap<String, PyObject>,
    pub type_names: HashMap<String, Py<PyString>>,
    pub field_names: Vec<Vec<Py<PyString>>>,
    pub unknown_tags_key: Py<PyString>,
    pub version_key: Py<PyString>,
    pub epoch_key: Py<PyString>,
}

fn none() -> *mut ffi::PyObject {
    unsafe {
        let n = ffi::Py_None();
        ffi::Py_INCREF(n);
        n
    }
}

fn boolean(b: bool) -> *mut ffi::PyObject {
    unsafe {
        let o = if b { ffi::Py_True() } else { ffi::Py_False() };
        ffi::Py_INCREF(o);
        o
    }
}

fn int(v: i64) -> *mut ffi::PyObject {
    unsafe { ffi::PyLong_FromLongLong(v) }
}

pub fn int128(py: Python<'_>, v: i128) -> *mut ffi::PyObject {
    if v >= i64::MIN as i128 && v <= i64::MAX as i128 {
        return int(v as i64);
    }
    v.into_pyobject(py).map(|b| b.into_ptr()).unwrap_or_else(|_| none())
}

fn opt_int(v: Option<i64>) -> *mut ffi::PyObject {
    v.map_or_else(none, int)
}

fn opt_int128(py: Python<'_>, v: Option<i128>) -> *mut ffi::PyObject {
    v.map_or_else(none, |x| int128(py, x))
}

fn bytes(py: Python<'_>, b: &[u8]) -> *mut ffi::PyObject {
    PyBytes::new(py, b).into_ptr()
}

/// Python's `bytes.decode("utf-8", "replace")`.
pub fn text(py: Python<'_>, b: &[u8]) -> *mut ffi::PyObject {
    unsafe {
        let o = ffi::PyUnicode_DecodeUTF8(b.as_ptr() as *const _, b.len() as ffi::Py_ssize_t, c"replace".as_ptr());
        if o.is_null() {
            PyErr::fetch(py);
            return PyString::new(py, &String::from_utf8_lossy(b)).into_ptr();
        }
        o
    }
}

impl PyOut {
    pub fn problem(&self, py: Python<'_>, p: &Prob, source: &Py<PyString>) -> PyResult<PyObject> {
        let kind = self.kinds[p.kind].clone_ref(py).into_ptr();
        let vals = [
            kind,
            PyString::new(py, &p.message).into_ptr(),
            source.clone_ref(py).into_ptr(),
            p.position.map_or_else(none, int),
            opt_int128(py, p.offset),
            p.raw.as_ref().map_or_else(none, |r| bytes(py, r)),
            none(),
        ];
        unsafe { self.problem.make(py, &vals) }
    }

    pub fn batch(&self, py: Python<'_>, b: &RBatch, source: &Py<PyString>, schemas: &Schemas) -> PyResult<PyObject> {
        let h = &b.header;
        let hvals = [
            int(h.position),
            int(h.base_offset),
            int(h.batch_length as i64),
            int(h.leader_epoch as i64),
            int(h.magic as i64),
            int(h.crc as i64),
            int(h.attributes as i64),
            int(h.last_offset_delta as i64),
            int(h.base_timestamp),
            int(h.max_timestamp),
            int(h.producer_id),
            int(h.producer_epoch as i64),
            int(h.base_sequence as i64),
            int(h.records_count as i64),
            boolean(h.crc_ok),
        ];
        let header = unsafe { self.header.make(py, &hvals)? };
        let list = unsafe { ffi::PyList_New(0) };
        if list.is_null() {
            return Err(PyErr::fetch(py));
        }
        let list_obj = unsafe { PyObject::from_owned_ptr(py, list) };
        for r in &b.records {
            let rec = self.record(py, b, r, schemas)?;
            if unsafe { ffi::PyList_Append(list, rec.as_ptr()) } != 0 {
                return Err(PyErr::fetch(py));
            }
        }
        let bvals = [header.into_ptr(), list_obj.into_ptr(), source.clone_ref(py).into_ptr()];
        unsafe { self.batch.make(py, &bvals) }
    }

    fn record(&self, py: Python<'_>, b: &RBatch, r: &Rec, schemas: &Schemas) -> PyResult<PyObject> {
        let headers = if r.headers.is_empty() {
            PyTuple::empty(py).into_ptr()
        } else {
            let items: Vec<Bound<'_, PyTuple>> = r
                .headers
                .iter()
                .map(|(k, v)| unsafe {
                    let key = Bound::from_owned_ptr(py, text(py, b.bytes(*k)));
                    let val = match v {
                        Some(v) => Bound::from_owned_ptr(py, bytes(py, b.bytes(*v))),
                        None => py.None().into_bound(py),
                    };
                    PyTuple::new(py, [key, val]).unwrap()
                })
                .collect();
            PyTuple::new(py, items)?.into_ptr()
        };
        let (type_name, data, unknown) = match &r.decoded {
            None => (none(), none(), PyDict::new(py).into_ptr()),
            Some(d) => {
                let tn = match self.type_names.get(&d.type_name) {
                    Some(s) => s.clone_ref(py).into_ptr(),
                    None => PyString::new(py, &d.type_name).into_ptr(),
                };
                let data = match d.marker {
                    Some((version, epoch)) => {
                        let dict = PyDict::new(py);
                        dict.set_item(self.version_key.bind(py), version)?;
                        dict.set_item(self.epoch_key.bind(py), epoch)?;
                        dict.into_ptr()
                    }
                    None => self.struct_dict(py, &d.data, schemas, false)?,
                };
                let unknown = PyDict::new(py);
                for (tag, raw) in &d.data.unknown {
                    unknown.set_item(*tag, PyBytes::new(py, raw))?;
                }
                (tn, data, unknown.into_ptr())
            }
        };
        let vals = [
            int128(py, r.offset),
            int128(py, r.timestamp),
            r.key.map_or_else(none, |k| bytes(py, b.bytes(k))),
            r.value.map_or_else(none, |v| bytes(py, b.bytes(v))),
            int(r.attributes as i64),
            int(r.ts_delta),
            headers,
            opt_int(r.control_type),
            opt_int(r.api_key),
            opt_int(r.version),
            type_name,
            data,
            unknown,
            r.error.as_ref().map_or_else(none, |e| PyString::new(py, e).into_ptr()),
        ];
        unsafe { self.record.make(py, &vals) }
    }

    fn struct_dict(
        &self,
        py: Python<'_>,
        sv: &StructVal,
        schemas: &Schemas,
        nested: bool,
    ) -> PyResult<*mut ffi::PyObject> {
        let dict = PyDict::new(py);
        let names = &self.field_names[sv.sid];
        for (fi, v) in sv.fields.iter().enumerate() {
            if let Some(v) = v {
                let value = unsafe { Bound::from_owned_ptr(py, self.value(py, v, schemas)?) };
                dict.set_item(names[fi].bind(py), value)?;
            }
        }
        if nested && !sv.unknown.is_empty() {
            let unknown = PyDict::new(py);
            for (tag, raw) in &sv.unknown {
                unknown.set_item(*tag, PyBytes::new(py, raw))?;
            }
            dict.set_item(self.unknown_tags_key.bind(py), unknown)?;
        }
        Ok(dict.into_ptr())
    }

    fn value(&self, py: Python<'_>, v: &Value, schemas: &Schemas) -> PyResult<*mut ffi::PyObject> {
        Ok(match v {
            Value::Null => none(),
            Value::Bool(b) => boolean(*b),
            Value::Int(i) => int(*i),
            Value::Float(f) => unsafe { ffi::PyFloat_FromDouble(*f) },
            Value::Str(s) => text(py, s),
            Value::Bytes(b) => bytes(py, b),
            Value::Uuid(u) => PyString::new(py, &uuid_text(u)).into_ptr(),
            Value::List(items) => {
                let list = unsafe { ffi::PyList_New(items.len() as ffi::Py_ssize_t) };
                if list.is_null() {
                    return Err(PyErr::fetch(py));
                }
                for (i, item) in items.iter().enumerate() {
                    let o = match self.value(py, item, schemas) {
                        Ok(o) => o,
                        Err(e) => {
                            unsafe { ffi::Py_DECREF(list) };
                            return Err(e);
                        }
                    };
                    unsafe { ffi::PyList_SET_ITEM(list, i as ffi::Py_ssize_t, o) };
                }
                list
            }
            Value::Struct(sv) => self.struct_dict(py, sv, schemas, true)?,
        })
    }
}

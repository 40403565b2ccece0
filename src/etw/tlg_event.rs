//! Building TraceLogging events, the bytes `etw_trace()` writes: the provider traits blob, the
//! event's self-describing metadata and its payload. The layout is the one dtx's own decoder
//! reads ([`super::decode::tlg`], FORMAT.md 4.12): metadata is a u16 size, a tag byte, the event
//! name, then per field its name, an in-type byte (0x80 set when an out-type byte follows) and
//! the out-type. No Windows dependency: the live writer (src/output/etw_writer.rs) hands these
//! bytes to `EventWriteTransfer`.
//!
//! The field types are those of Microsoft's DTrace for Windows documentation of `etw_trace`
//! ("Supported ETW data types", windows-driver-docs `devtest/dtrace-etw.md`), each mapped to the
//! TraceLogging in-type and out-type of the same meaning (TraceLoggingProvider.h's `TlgIn*`,
//! `TlgOut*`, the out-types being TDH's numbers).

use super::record::Guid;

/// One `etw_*` field type of `etw_trace()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EtwFieldType {
    /// A structure: the value is how many of the following fields it holds.
    Struct,
    /// UTF-16 text, NUL-terminated.
    String,
    /// 8-bit text, NUL-terminated.
    MbcsString,
    Int8,
    UInt8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float,
    Double,
    Bool32,
    HexInt32,
    HexInt64,
    /// 8-bit text with a u16 byte count before it.
    CountedMbcsString,
    IntPtr,
    UIntPtr,
    Pointer,
    Char16,
    Char8,
    Bool8,
    HexInt8,
    HexInt16,
    Pid,
    Tid,
    MbcsXml,
    MbcsJson,
    CountedMbcsXml,
    CountedMbcsJson,
    Win32Error,
    NtStatus,
    HResult,
}

/// TraceLogging in-types (low five bits of the in-type byte).
mod tin {
    pub const UNICODESTRING: u8 = 1;
    pub const ANSISTRING: u8 = 2;
    pub const INT8: u8 = 3;
    pub const UINT8: u8 = 4;
    pub const INT16: u8 = 5;
    pub const UINT16: u8 = 6;
    pub const INT32: u8 = 7;
    pub const UINT32: u8 = 8;
    pub const INT64: u8 = 9;
    pub const UINT64: u8 = 10;
    pub const FLOAT: u8 = 11;
    pub const DOUBLE: u8 = 12;
    pub const BOOL32: u8 = 13;
    pub const HEXINT32: u8 = 20;
    pub const HEXINT64: u8 = 21;
    pub const COUNTEDANSISTRING: u8 = 23;
    pub const STRUCT: u8 = 24;
}

/// Out-types (TDH_OUTTYPE_* numbers) that refine how an in-type is shown.
mod tout {
    pub const NONE: u8 = 0;
    pub const STRING: u8 = 1;
    pub const BOOLEAN: u8 = 13;
    pub const HEX: u8 = 15;
    pub const PID: u8 = 20;
    pub const TID: u8 = 21;
    pub const XML: u8 = 28;
    pub const WIN32ERROR: u8 = 30;
    pub const NTSTATUS: u8 = 31;
    pub const HRESULT: u8 = 32;
    pub const JSON: u8 = 34;
}

/// Every type with its `etw_*` name.
const NAMES: &[(EtwFieldType, &str)] = {
    use EtwFieldType::*;
    &[
        (Struct, "etw_struct"),
        (String, "etw_string"),
        (MbcsString, "etw_mbcsstring"),
        (Int8, "etw_int8"),
        (UInt8, "etw_uint8"),
        (Int16, "etw_int16"),
        (UInt16, "etw_uint16"),
        (Int32, "etw_int32"),
        (UInt32, "etw_uint32"),
        (Int64, "etw_int64"),
        (UInt64, "etw_uint64"),
        (Float, "etw_float"),
        (Double, "etw_double"),
        (Bool32, "etw_bool32"),
        (HexInt32, "etw_hexint32"),
        (HexInt64, "etw_hexint64"),
        (CountedMbcsString, "etw_countedmbcsstring"),
        (IntPtr, "etw_intptr"),
        (UIntPtr, "etw_uintptr"),
        (Pointer, "etw_pointer"),
        (Char16, "etw_char16"),
        (Char8, "etw_char8"),
        (Bool8, "etw_bool8"),
        (HexInt8, "etw_hexint8"),
        (HexInt16, "etw_hexint16"),
        (Pid, "etw_pid"),
        (Tid, "etw_tid"),
        (MbcsXml, "etw_mbcsxml"),
        (MbcsJson, "etw_mbcsjson"),
        (CountedMbcsXml, "etw_countedmbcsxml"),
        (CountedMbcsJson, "etw_countedmbcsjson"),
        (Win32Error, "etw_win32error"),
        (NtStatus, "etw_ntstatus"),
        (HResult, "etw_hresult"),
    ]
};

impl EtwFieldType {
    /// The type an `etw_*` name stands for.
    pub fn from_name(name: &str) -> Option<EtwFieldType> {
        NAMES.iter().find(|(_, n)| *n == name).map(|(t, _)| *t)
    }

    /// The `etw_*` name.
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(t, _)| *t == self)
            .map_or("", |(_, n)| n)
    }

    /// Every `etw_*` name, for messages.
    pub fn all_names() -> impl Iterator<Item = &'static str> {
        NAMES.iter().map(|(_, n)| *n)
    }

    /// Whether the field's value is a D string (else an integer).
    pub fn takes_string(self) -> bool {
        use EtwFieldType::*;
        matches!(
            self,
            String
                | MbcsString
                | CountedMbcsString
                | MbcsXml
                | MbcsJson
                | CountedMbcsXml
                | CountedMbcsJson
        )
    }

    /// The TraceLogging in-type and out-type (64-bit pointers).
    fn in_out(self) -> (u8, u8) {
        use EtwFieldType::*;
        match self {
            Struct => (tin::STRUCT, tout::NONE),
            String => (tin::UNICODESTRING, tout::NONE),
            MbcsString => (tin::ANSISTRING, tout::NONE),
            Int8 => (tin::INT8, tout::NONE),
            UInt8 => (tin::UINT8, tout::NONE),
            Int16 => (tin::INT16, tout::NONE),
            UInt16 => (tin::UINT16, tout::NONE),
            Int32 => (tin::INT32, tout::NONE),
            UInt32 => (tin::UINT32, tout::NONE),
            Int64 | IntPtr => (tin::INT64, tout::NONE),
            UInt64 | UIntPtr => (tin::UINT64, tout::NONE),
            Float => (tin::FLOAT, tout::NONE),
            Double => (tin::DOUBLE, tout::NONE),
            Bool32 => (tin::BOOL32, tout::NONE),
            HexInt32 => (tin::HEXINT32, tout::NONE),
            HexInt64 | Pointer => (tin::HEXINT64, tout::NONE),
            CountedMbcsString => (tin::COUNTEDANSISTRING, tout::NONE),
            Char16 => (tin::UINT16, tout::STRING),
            Char8 => (tin::UINT8, tout::STRING),
            Bool8 => (tin::UINT8, tout::BOOLEAN),
            HexInt8 => (tin::UINT8, tout::HEX),
            HexInt16 => (tin::UINT16, tout::HEX),
            Pid => (tin::UINT32, tout::PID),
            Tid => (tin::UINT32, tout::TID),
            MbcsXml => (tin::ANSISTRING, tout::XML),
            MbcsJson => (tin::ANSISTRING, tout::JSON),
            CountedMbcsXml => (tin::COUNTEDANSISTRING, tout::XML),
            CountedMbcsJson => (tin::COUNTEDANSISTRING, tout::JSON),
            Win32Error => (tin::UINT32, tout::WIN32ERROR),
            NtStatus => (tin::UINT32, tout::NTSTATUS),
            HResult => (tin::INT32, tout::HRESULT),
        }
    }
}

/// One field of an event: its type and name; a struct's member count is `members`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtwField {
    pub ty: EtwFieldType,
    pub name: String,
    /// For `etw_struct`: how many of the following fields the structure holds.
    pub members: u8,
}

/// What an `etw_trace()` call describes at compile time: provider, event and fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtwEventDef {
    pub provider: String,
    pub guid: Guid,
    pub event: String,
    pub fields: Vec<EtwField>,
}

/// A field's value when the event is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtwValue<'a> {
    Int(i64),
    /// A D string's bytes (stops at the first NUL, if any).
    Str(&'a [u8]),
}

fn push_cstr(out: &mut Vec<u8>, s: &str) {
    // a NUL inside a name would end it early: leave it out
    out.extend(s.bytes().filter(|&b| b != 0));
    out.push(0);
}

/// Writes the blob's size into its first two bytes.
fn seal(mut blob: Vec<u8>) -> Vec<u8> {
    let n = blob.len().min(u16::MAX as usize) as u16;
    blob[..2].copy_from_slice(&n.to_le_bytes());
    blob
}

impl EtwEventDef {
    /// The provider traits blob (`EventSetInformation(EventProviderSetTraits)`, and the
    /// PROVIDER_METADATA data descriptor): u16 size, the provider name, no traits.
    pub fn provider_traits(&self) -> Vec<u8> {
        let mut b = vec![0, 0];
        push_cstr(&mut b, &self.provider);
        seal(b)
    }

    /// The event metadata blob (the EVENT_METADATA data descriptor).
    pub fn metadata(&self) -> Vec<u8> {
        let mut b = vec![0, 0, 0];
        push_cstr(&mut b, &self.event);
        for f in &self.fields {
            push_cstr(&mut b, &f.name);
            let (tin, tout) = f.ty.in_out();
            let out = if f.ty == EtwFieldType::Struct {
                f.members & 0x7f
            } else {
                tout
            };
            if out != 0 {
                b.push(tin | 0x80);
                b.push(out);
            } else {
                b.push(tin);
            }
        }
        seal(b)
    }

    /// The payload of one event: each field's value in the field's encoding (a struct has none).
    /// `values` has one value per field that is not a struct, in order.
    pub fn payload(&self, values: &[EtwValue<'_>]) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut vals = values.iter();
        for f in &self.fields {
            if f.ty == EtwFieldType::Struct {
                continue;
            }
            let v = vals
                .next()
                .ok_or_else(|| format!("etw_trace(): no value for field {}", f.name))?;
            encode(f, *v, &mut out)?;
        }
        Ok(out)
    }
}

fn text(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

fn encode(f: &EtwField, v: EtwValue<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    use EtwFieldType::*;
    match (f.ty, v) {
        (String, EtwValue::Str(s)) => {
            // D strings are bytes, UTF-8 by convention: written as UTF-16
            for u in std::string::String::from_utf8_lossy(text(s)).encode_utf16() {
                out.extend_from_slice(&u.to_le_bytes());
            }
            out.extend_from_slice(&[0, 0]);
        }
        (MbcsString | MbcsXml | MbcsJson, EtwValue::Str(s)) => {
            out.extend_from_slice(text(s));
            out.push(0);
        }
        (CountedMbcsString | CountedMbcsXml | CountedMbcsJson, EtwValue::Str(s)) => {
            let t = text(s);
            let t = &t[..t.len().min(u16::MAX as usize)];
            out.extend_from_slice(&(t.len() as u16).to_le_bytes());
            out.extend_from_slice(t);
        }
        (ty, EtwValue::Int(i)) if !ty.takes_string() => match ty.in_out().0 {
            tin::INT8 | tin::UINT8 => out.push(i as u8),
            tin::INT16 | tin::UINT16 => out.extend_from_slice(&(i as u16).to_le_bytes()),
            tin::INT32 | tin::UINT32 | tin::BOOL32 | tin::HEXINT32 => {
                out.extend_from_slice(&(i as u32).to_le_bytes())
            }
            // D has no floating point: the integer's value, converted
            tin::FLOAT => out.extend_from_slice(&(i as f32).to_le_bytes()),
            tin::DOUBLE => out.extend_from_slice(&(i as f64).to_le_bytes()),
            _ => out.extend_from_slice(&i.to_le_bytes()),
        },
        (ty, _) => {
            return Err(format!(
                "etw_trace(): field {} of type {} got a {}",
                f.name,
                ty.name(),
                if ty.takes_string() {
                    "number"
                } else {
                    "string"
                }
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etw::decode::schema::SchemaCursor;
    use crate::etw::decode::tlg;
    use crate::etw::decode::value::{FieldType, Value};

    fn def(fields: &[(EtwFieldType, &str, u8)]) -> EtwEventDef {
        EtwEventDef {
            provider: "Tools.DTrace.Platform".into(),
            guid: Guid::parse("AAD330CC-4BB9-588A-B252-08276853AF02").unwrap(),
            event: "My custom event from DTrace".into(),
            fields: fields
                .iter()
                .map(|(ty, name, members)| EtwField {
                    ty: *ty,
                    name: name.to_string(),
                    members: *members,
                })
                .collect(),
        }
    }

    /// Decodes an event with dtx's TraceLogging decoder: (name, type, value text) per field.
    fn decode(d: &EtwEventDef, payload: &[u8]) -> (String, Vec<(String, FieldType, String)>) {
        let meta = d.metadata();
        let schema = tlg::parse_metadata(&meta).expect("metadata parses");
        let mut cur = SchemaCursor::new(&schema, payload, 8);
        let mut out = Vec::new();
        let show = |v: &Value| {
            let mut b = Vec::new();
            v.write_text(&mut b);
            String::from_utf8(b).unwrap()
        };
        while let Some((p, v)) = cur.next_value(&|p| p.name) {
            let text = match &v {
                Value::Struct(m) => m
                    .iter()
                    .map(|(n, v)| format!("{n}={}", show(v)))
                    .collect::<Vec<_>>()
                    .join(","),
                v => show(v),
            };
            out.push((p.name.to_string(), p.ty, text));
        }
        assert!(!cur.short, "payload cut short");
        (schema.name.to_string(), out)
    }

    #[test]
    fn every_documented_type_name_is_known() {
        assert_eq!(EtwFieldType::all_names().count(), 34);
        for n in EtwFieldType::all_names() {
            assert_eq!(EtwFieldType::from_name(n).unwrap().name(), n);
        }
        assert_eq!(EtwFieldType::from_name("etw_int128"), None);
    }

    #[test]
    fn provider_traits_name_the_provider() {
        let d = def(&[]);
        assert_eq!(
            tlg::provider_name(&d.provider_traits()),
            Some("Tools.DTrace.Platform")
        );
    }

    #[test]
    fn microsofts_example_round_trips() {
        use EtwFieldType::*;
        let d = def(&[
            (Int32, "PID", 0),
            (String, "Execname", 0),
            (MbcsString, "Probefunc", 0),
        ]);
        let p = d
            .payload(&[
                EtwValue::Int(4242),
                EtwValue::Str(b"notepad.exe\0\0\0"),
                EtwValue::Str(b"NtClose"),
            ])
            .unwrap();
        let (name, fields) = decode(&d, &p);
        assert_eq!(name, "My custom event from DTrace");
        assert_eq!(
            fields,
            vec![
                ("PID".into(), FieldType::I32, "4242".into()),
                ("Execname".into(), FieldType::Utf16Z, "notepad.exe".into()),
                ("Probefunc".into(), FieldType::AnsiZ, "NtClose".into()),
            ]
        );
    }

    #[test]
    fn integers_structs_and_counted_strings_round_trip() {
        use EtwFieldType::*;
        let d = def(&[
            (Int8, "i8", 0),
            (UInt16, "u16", 0),
            (Int64, "i64", 0),
            (UInt64, "u64", 0),
            (HexInt32, "h32", 0),
            (Struct, "pair", 2),
            (UInt32, "a", 0),
            (Bool8, "b", 0),
            (CountedMbcsString, "counted", 0),
            (Pid, "pid", 0),
            (Double, "d", 0),
        ]);
        let p = d
            .payload(&[
                EtwValue::Int(-5),
                EtwValue::Int(65535),
                EtwValue::Int(i64::MIN),
                EtwValue::Int(-1),
                EtwValue::Int(0xdead_beef),
                EtwValue::Int(7),
                EtwValue::Int(1),
                EtwValue::Str(b"abc"),
                EtwValue::Int(99),
                EtwValue::Int(3),
            ])
            .unwrap();
        let (_, fields) = decode(&d, &p);
        let got: Vec<(&str, FieldType, &str)> = fields
            .iter()
            .map(|(n, t, v)| (n.as_str(), *t, v.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("i8", FieldType::I8, "-5"),
                ("u16", FieldType::U16, "65535"),
                ("i64", FieldType::I64, "-9223372036854775808"),
                ("u64", FieldType::U64, "18446744073709551615"),
                ("h32", FieldType::HexI32, "3735928559"), // 0xdeadbeef
                ("pair", FieldType::Struct, "a=7,b=1"),
                ("counted", FieldType::CountedAnsi, "abc"),
                ("pid", FieldType::U32, "99"),
                ("d", FieldType::F64, "3"),
            ]
        );
    }

    #[test]
    fn a_value_of_the_wrong_kind_is_an_error() {
        let d = def(&[(EtwFieldType::Int32, "n", 0)]);
        assert!(d.payload(&[EtwValue::Str(b"x")]).is_err());
        assert!(d.payload(&[]).is_err());
    }
}

//! `etw_trace()`, the action of Microsoft's DTrace for Windows that writes a new ETW event
//! (windows-driver-docs `devtest/dtrace-etw.md`, "Adding new ETW events"):
//!
//! ```text
//! etw_trace("Provider.Name", "provider-guid", "Event name", level, keyword,
//!           "etw_int32", "FieldName", value, "etw_string", "Other", str, ...)
//! ```
//!
//! The provider, GUID, event name and every field's type and name are string constants, so the
//! event's TraceLogging metadata is fixed when the program compiles; the level, keyword and
//! values are evaluated at each firing. An `etw_struct` field's value is a constant, the number
//! of the fields after it that the structure holds.

use super::expr::Typed;
use super::Checker;
use crate::etw::record::Guid;
use crate::etw::tlg_event::{EtwEventDef, EtwField, EtwFieldType};
use crate::lang::ast::Expr;
use crate::lang::diag::{derr, DResult};

/// An `etw_trace()` call checked: the event it describes, and the indices of the arguments
/// evaluated at each firing (level, keyword, then each field value that is not a struct's).
pub(crate) struct EtwTraceCall {
    pub def: EtwEventDef,
    pub runtime_args: Vec<usize>,
}

impl Checker<'_> {
    /// Checks the arguments of `etw_trace()` and builds the event it writes.
    pub(crate) fn etw_trace_call(&mut self, args: &[Expr], line: u32) -> DResult<EtwTraceCall> {
        let typed: Vec<Typed> = args.iter().map(|a| self.expr(a)).collect::<DResult<_>>()?;
        let n = typed.len();
        if n < 5 || !(n - 5).is_multiple_of(3) {
            return Err(derr(
                "D_PROTO_LEN",
                line,
                format!(
                    "etw_trace( ) prototype mismatch: {n} arg{} passed, expected provider, GUID, \
                     event name, level, keyword, then (type, name, value) for each field",
                    if n == 1 { "" } else { "s" }
                ),
            ));
        }
        let string = |i: usize, what: &str| -> DResult<String> {
            typed[i].str_const.clone().ok_or_else(|| {
                derr(
                    "D_PROTO_ARG",
                    line,
                    format!(
                        "etw_trace( ) argument #{}: the {what} must be a string constant",
                        i + 1
                    ),
                )
            })
        };
        let provider = string(0, "provider name")?;
        let guid_text = string(1, "provider GUID")?;
        let guid = Guid::parse(&guid_text).ok_or_else(|| {
            derr(
                "D_PROTO_ARG",
                line,
                format!(
                    "etw_trace( ) argument #2: \"{guid_text}\" is not a GUID \
                     (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
                ),
            )
        })?;
        let event = string(2, "event name")?;
        for (i, what) in [(3, "level"), (4, "keyword")] {
            if !self.types.is_integer(typed[i].ty) {
                return Err(derr(
                    "D_PROTO_ARG",
                    line,
                    format!(
                        "etw_trace( ) argument #{}: the {what} must be an integer",
                        i + 1
                    ),
                ));
            }
        }
        if let Some(l) = typed[3].konst {
            if !(0..=255).contains(&l) {
                return Err(derr(
                    "D_PROTO_ARG",
                    line,
                    format!("etw_trace( ) argument #4: level {l} is not in 0..255"),
                ));
            }
        }
        let mut fields = Vec::new();
        let mut runtime_args = vec![3, 4];
        for t in (5..n).step_by(3) {
            let type_name = string(t, "field type")?;
            let ty = EtwFieldType::from_name(&type_name).ok_or_else(|| {
                derr(
                    "D_PROTO_ARG",
                    line,
                    format!(
                        "etw_trace( ) argument #{}: unknown field type \"{type_name}\" (one of {})",
                        t + 1,
                        EtwFieldType::all_names().collect::<Vec<_>>().join(", ")
                    ),
                )
            })?;
            let name = string(t + 1, "field name")?;
            let v = &typed[t + 2];
            let mut members = 0u8;
            if ty == EtwFieldType::Struct {
                let fields_after = (n - t) / 3 - 1;
                match v.konst {
                    Some(m) if (1..=127).contains(&m) && m as usize <= fields_after => {
                        members = m as u8;
                    }
                    _ => {
                        return Err(derr(
                            "D_PROTO_ARG",
                            line,
                            format!(
                                "etw_trace( ) argument #{}: the value of etw_struct field {name} \
                                 must be a constant count of the fields after it (1..{})",
                                t + 3,
                                fields_after.min(127)
                            ),
                        ))
                    }
                }
            } else {
                let ok = if ty.takes_string() {
                    self.types.is_string(v.ty) || self.types.is_char_ptr_or_array(v.ty)
                } else {
                    self.types.is_integer(v.ty) || self.types.is_pointer(v.ty)
                };
                if !ok {
                    return Err(derr(
                        "D_PROTO_ARG",
                        line,
                        format!(
                            "etw_trace( ) argument #{}: field {name} of type {type_name} needs {}, not {}",
                            t + 3,
                            if ty.takes_string() { "a string" } else { "an integer" },
                            self.types.name(v.ty)
                        ),
                    ));
                }
                runtime_args.push(t + 2);
            }
            fields.push(EtwField { ty, name, members });
        }
        Ok(EtwTraceCall {
            def: EtwEventDef {
                provider,
                guid,
                event,
                fields,
            },
            runtime_args,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::consumer::etw_trace_args;
    use crate::engine::standalone::{standalone_vm, standard_probe};
    use crate::etw::decode::schema::SchemaCursor;
    use crate::etw::decode::tlg;
    use crate::etw::decode::value::FieldType;
    use crate::ir::ActionKind;
    use crate::vm::{FiringCtx, Record};

    /// A D program's `etw_trace()` fires; the event dtx builds from its record decodes with
    /// dtx's TraceLogging decoder to the names, types and values the program gave.
    #[test]
    fn a_programs_event_decodes_to_its_fields() {
        let (mut vm, _) = standalone_vm(
            r#"BEGIN { etw_trace("Tools.DTrace.Platform", "AAD330CC-4BB9-588A-B252-08276853AF02",
                "My event", 2, 0x20,
                "etw_int32", "Answer", 40 + 2,
                "etw_string", "Exec", execname,
                "etw_struct", "Pair", 2,
                "etw_uint8", "a", 7,
                "etw_mbcsstring", "b", strjoin("h", "i"),
                "etw_hexint64", "h", (int64_t)0x123456789); }"#,
        )
        .unwrap();
        let p = standard_probe("BEGIN").unwrap();
        vm.fire(&FiringCtx::synthetic(&p, 1, 1, b"notepad.exe"));
        let program = vm.program.clone();
        let (def, values) = vm
            .records
            .iter()
            .find_map(|(_, r)| match r {
                Record::Lib { action, values } => match &program.actions()[*action as usize].kind {
                    ActionKind::EtwTrace(d) => Some((d.clone(), values.clone())),
                    _ => None,
                },
                _ => None,
            })
            .expect("an etw_trace record");
        let (level, keyword, fields) = etw_trace_args(&values);
        assert_eq!((level, keyword), (2, 0x20));
        assert_eq!(
            tlg::provider_name(&def.provider_traits()),
            Some("Tools.DTrace.Platform")
        );
        let payload = def.payload(&fields).unwrap();
        let meta = def.metadata();
        let schema = tlg::parse_metadata(&meta).unwrap();
        assert_eq!(schema.name, "My event");
        let mut cur = SchemaCursor::new(&schema, &payload, 8);
        let mut got = Vec::new();
        while let Some((p, v)) = cur.next_value(&|p| p.name) {
            let mut t = Vec::new();
            v.write_text(&mut t);
            got.push((p.name.to_string(), p.ty, String::from_utf8(t).unwrap()));
        }
        assert!(!cur.short);
        let pair = &schema.props[schema.top[2]];
        let members: Vec<&str> = pair.members.iter().map(|&i| schema.props[i].name).collect();
        assert_eq!(members, ["a", "b"]);
        let got: Vec<(&str, FieldType)> = got.iter().map(|(n, t, _)| (n.as_str(), *t)).collect();
        assert_eq!(
            got,
            [
                ("Answer", FieldType::I32),
                ("Exec", FieldType::Utf16Z),
                ("Pair", FieldType::Struct),
                ("h", FieldType::HexI64),
            ]
        );
        let mut cur = SchemaCursor::new(&schema, &payload, 8);
        let mut texts = Vec::new();
        while let Some((_, v)) = cur.next_value(&|p| p.name) {
            let mut t = Vec::new();
            v.write_text(&mut t);
            texts.push(String::from_utf8(t).unwrap());
        }
        assert_eq!(texts[0], "42");
        assert_eq!(texts[1], "notepad.exe");
        assert!(
            texts[2].contains('7') && texts[2].contains("hi"),
            "{}",
            texts[2]
        );
        assert_eq!(texts[3], 0x123456789u64.to_string());
    }

    #[test]
    fn bad_calls_are_compile_errors() {
        let guid = "AAD330CC-4BB9-588A-B252-08276853AF02";
        for (args, want) in [
            (format!(r#""P", "{guid}", "E", 1"#), "prototype mismatch"),
            (r#""P", "nope", "E", 1, 0"#.to_string(), "is not a GUID"),
            (
                format!(r#""P", "{guid}", "E", 1, 0, "etw_int33", "x", 1"#),
                "unknown field type",
            ),
            (
                format!(r#""P", "{guid}", "E", 1, 0, "etw_int32", "x", "s""#),
                "needs an integer",
            ),
            (
                format!(r#""P", "{guid}", "E", 1, 0, "etw_string", "x", 1"#),
                "needs a string",
            ),
            (
                format!(r#""P", "{guid}", "E", 1, 0, "etw_struct", "s", 2, "etw_int32", "x", 1"#),
                "constant count",
            ),
            (format!(r#""P", "{guid}", "E", 300, 0"#), "not in 0..255"),
        ] {
            let err = standalone_vm(&format!("BEGIN {{ etw_trace({args}); }}"))
                .err()
                .unwrap_or_default();
            assert!(err.contains(want), "{args}: {err}");
        }
    }
}

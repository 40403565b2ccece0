//! Expression typing: every operator's operand rules, variables (global, `self->`, `this->`,
//! associative arrays), members, casts, `sizeof`/`offsetof`/`stringof`/`xlate`, and constant
//! folding of integer expressions.

use super::{Checker, VarInfo, VarScope};
use crate::lang::ast::*;
use crate::lang::builtins::BuiltinKind;
use crate::lang::diag::{derr, DResult, Diagnostic};
use crate::lang::types::{TypeId, TypeKind};

/// The result of typing an expression.
#[derive(Clone, Debug)]
pub struct Typed {
    pub ty: TypeId,
    pub lvalue: bool,
    pub writable: bool,
    /// The value of an integer constant expression.
    pub konst: Option<i64>,
    /// A D variable (its address cannot be taken).
    pub dvar: bool,
    pub bitfield: bool,
    /// An aggregation reference (`@a`).
    pub agg: Option<String>,
    /// A string literal.
    pub str_const: Option<String>,
    /// The result of an action (void, not usable as a value).
    pub action: bool,
}

impl Typed {
    pub fn rvalue(ty: TypeId) -> Self {
        Typed {
            ty,
            lvalue: false,
            writable: false,
            konst: None,
            dvar: false,
            bitfield: false,
            agg: None,
            str_const: None,
            action: false,
        }
    }

    fn konst(ty: TypeId, v: i64) -> Self {
        Typed {
            konst: Some(v),
            ..Typed::rvalue(ty)
        }
    }

    fn var(ty: TypeId) -> Self {
        Typed {
            lvalue: true,
            writable: true,
            dvar: true,
            ..Typed::rvalue(ty)
        }
    }
}

fn incompat(line: u32, a: &str, op: &str, b: &str) -> Diagnostic {
    derr(
        "D_OP_INCOMPAT",
        line,
        format!("operands have incompatible types: \"{a}\" {op} \"{b}\""),
    )
}

impl Checker<'_> {
    /// Type of a built-in variable or prototype text.
    pub(crate) fn type_from_text(&mut self, text: &str) -> TypeId {
        let text = text.trim();
        if let Some(t) = self.types.lookup(text) {
            return t;
        }
        if let Some(&t) = self.text_types.get(text) {
            return t;
        }
        let t = self.parse_type_text(text);
        self.text_types.insert(text.to_string(), t);
        t
    }

    fn parse_type_text(&mut self, text: &str) -> TypeId {
        let names: crate::lang::parser::TypeNames = self.types.type_names().cloned().collect();
        let cleaned: String = text
            .split_whitespace()
            .map(|w| match w.rfind('`') {
                Some(i) => &w[i + 1..],
                None => w,
            })
            .collect::<Vec<_>>()
            .join(" ");
        match crate::lang::parser::parse_type_name(&cleaned, names) {
            Ok(tn) => self.type_name(&tn).unwrap_or(self.types.int64),
            Err(_) => match text {
                "stack" => self.types.stack,
                "_symaddr" => self.types.symaddr,
                "_usymaddr" => self.types.usymaddr,
                _ => self.types.int64,
            },
        }
    }

    /// `string`, `char *` and `char [n]` are interchangeable as strings.
    pub(crate) fn is_strcompat(&self, t: TypeId) -> bool {
        self.types.is_string(t) || self.types.is_char_ptr_or_array(t)
    }

    /// Pointer compatibility (`dt_node_is_ptrcompat`): two pointers or arrays whose referents
    /// are compatible (or either is `void`), or one of them the integer constant 0.
    pub(crate) fn ptr_compatible(
        &self,
        a: TypeId,
        ak: Option<i64>,
        b: TypeId,
        bk: Option<i64>,
    ) -> bool {
        let t = &self.types;
        let (ai, bi) = (t.is_integer(a), t.is_integer(b));
        if ai && bi {
            return false;
        }
        if (ai && ak != Some(0)) || (bi && bk != Some(0)) {
            return false;
        }
        let ptrish = |x: TypeId| t.is_pointer(x) || t.is_array(x) || t.is_string(x);
        if ai || bi {
            return ptrish(if ai { b } else { a });
        }
        if !ptrish(a) || !ptrish(b) {
            return false;
        }
        let r = |x: TypeId| {
            if t.is_string(x) {
                t.char
            } else {
                t.referent(x).unwrap_or(t.void)
            }
        };
        let (ra, rb) = (r(a), r(b));
        t.is_void(ra)
            || t.is_void(rb)
            || t.compatible(ra, rb)
            || (t.is_integer(ra) && t.is_integer(rb) && t.size_of(ra) == t.size_of(rb))
    }

    /// Argument/assignment compatibility (`dt_node_is_argcompat`).
    pub(crate) fn arg_compat(&self, to: TypeId, v: &Typed) -> bool {
        let t = &self.types;
        if t.is_integer(to) && t.is_integer(v.ty) {
            return true;
        }
        if self.is_strcompat(to) && self.is_strcompat(v.ty) {
            return true;
        }
        for o in [t.stack, t.symaddr, t.usymaddr] {
            let ro = t.resolve(o);
            if t.resolve(to) == ro && t.resolve(v.ty) == ro {
                return true;
            }
        }
        if t.is_sou(to) || t.is_function(to) {
            return t.compatible(to, v.ty);
        }
        self.ptr_compatible(to, None, v.ty, v.konst)
    }

    /// Whether a value can be assigned to a variable/member of type `to`.
    pub(crate) fn assignable(&self, to: TypeId, v: &Typed) -> bool {
        let t = &self.types;
        if t.compatible(to, v.ty) || (t.is_arith(to) && t.is_arith(v.ty)) {
            return true;
        }
        self.arg_compat(to, v)
    }

    pub fn expr(&mut self, e: &Expr) -> DResult<Typed> {
        let line = e.line;
        match &e.kind {
            ExprKind::Int {
                value,
                suffix,
                decimal,
            } => {
                let ty = self
                    .types
                    .int_type_for(*value, !decimal, suffix.longs, suffix.unsigned);
                let size = self.types.size_of(ty);
                let v = if size == 4 {
                    if self.types.is_signed(ty) {
                        *value as i32 as i64
                    } else {
                        *value as u32 as i64
                    }
                } else {
                    *value as i64
                };
                Ok(Typed::konst(ty, v))
            }
            ExprKind::Str(s) => Ok(Typed {
                str_const: Some(s.clone()),
                ..Typed::rvalue(self.types.string)
            }),
            ExprKind::Ident(name) => self.ident(name, line),
            ExprKind::Agg(name) => match self.aggs.get(name) {
                Some(_) => Ok(Typed {
                    agg: Some(name.clone()),
                    dvar: true,
                    ..Typed::rvalue(self.types.int64)
                }),
                None => Err(self.undefined(name, line)),
            },
            ExprKind::SelfRef | ExprKind::ThisRef => Err(derr(
                "D_SYNTAX",
                line,
                "self and this must be followed by ->",
            )),
            ExprKind::Member { base, name, arrow } => self.member(base, name, *arrow, line),
            ExprKind::Index { base, keys } => self.index(base, keys, line, false),
            ExprKind::Call { func, args } => self.call(func, args, line),
            ExprKind::Unary(op, x) => self.unary(*op, x, line),
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, line),
            ExprKind::Assign(op, a, b) => self.assign(*op, a, b, line),
            ExprKind::Ternary(c, a, b) => {
                let tc = self.expr(c)?;
                if tc.action {
                    return Err(derr(
                        "D_OP_ACT",
                        line,
                        "action cannot be used in a conditional context",
                    ));
                }
                if !self.types.is_scalar(tc.ty) {
                    return Err(derr(
                        "D_OP_SCALAR",
                        line,
                        "operator ?: expression must be of scalar type",
                    ));
                }
                let ta = self.expr(a)?;
                let tb = self.expr(b)?;
                if ta.action || tb.action {
                    return Err(derr(
                        "D_OP_ACT",
                        line,
                        "action cannot be used in a conditional context",
                    ));
                }
                let ok = self.types.compatible(ta.ty, tb.ty)
                    || (self.types.is_arith(ta.ty) && self.types.is_arith(tb.ty))
                    || (self.is_strcompat(ta.ty) && self.is_strcompat(tb.ty))
                    || self.ptr_compatible(ta.ty, ta.konst, tb.ty, tb.konst);
                if !ok {
                    return Err(derr(
                        "D_OP_INCOMPAT",
                        line,
                        "operator ?: operands must have compatible types",
                    ));
                }
                let ty = if self.types.is_arith(ta.ty) && self.types.is_arith(tb.ty) {
                    self.types.arith_result(ta.ty, tb.ty)
                } else if self.types.is_string(tb.ty) {
                    tb.ty
                } else {
                    ta.ty
                };
                let konst = match (tc.konst, ta.konst, tb.konst) {
                    (Some(c), Some(x), Some(y)) => Some(if c != 0 { x } else { y }),
                    _ => None,
                };
                Ok(Typed {
                    konst,
                    ..Typed::rvalue(ty)
                })
            }
            ExprKind::Cast(tn, x) => {
                let to = self.type_name(tn)?;
                let v = self.expr(x)?;
                let t = &self.types;
                // xlate<T>(...) has a dynamic type (dt_cook_op2, DT_TOK_XLATE): only a cast to
                // void takes it (DT_TOK_LPAR); dt_node_type_name names it by its ident kind
                if matches!(x.kind, ExprKind::Xlate(..)) && !t.is_void(to) {
                    let what = if t.is_pointer(v.ty) {
                        "pointer to translated data"
                    } else {
                        "translated data"
                    };
                    return Err(derr(
                        "D_CAST_INVAL",
                        line,
                        format!("invalid cast expression: \"{what}\" to \"{}\"", t.name(to)),
                    ));
                }
                let ok = (t.is_scalar(to)
                    && (t.is_scalar(v.ty) || t.is_array(v.ty) || t.is_function(v.ty)))
                    || t.is_void(to)
                    // libdtrace's dt_cook_op2 (DT_TOK_LPAR): a cast to `string` takes a
                    // scalar, a pointer or anything string-compatible (a char array); the
                    // value is then read as the string at that address, as stringof()
                    || (t.is_string(to)
                        && (t.is_scalar(v.ty) || t.is_pointer(v.ty) || self.is_strcompat(v.ty)))
                    || t.compatible(to, v.ty);
                if !ok {
                    return Err(derr(
                        "D_CAST_INVAL",
                        line,
                        format!(
                            "invalid cast expression: \"{}\" to \"{}\"",
                            t.name(v.ty),
                            t.name(to)
                        ),
                    ));
                }
                let konst = match v.konst {
                    Some(k) if t.is_integer(to) => {
                        Some(truncate(k, t.size_of(to), t.is_signed(to)))
                    }
                    Some(k) if t.is_pointer(to) => Some(k),
                    _ => None,
                };
                Ok(Typed {
                    konst,
                    ..Typed::rvalue(to)
                })
            }
            ExprKind::SizeofType(tn) => {
                let t = self.type_name(tn)?;
                let size = self.types.size_of(t);
                if size == 0 && !self.types.is_string(t) {
                    return Err(derr(
                        "D_SIZEOF_TYPE",
                        line,
                        "cannot apply sizeof to an operand of unknown size",
                    ));
                }
                let size = if self.types.is_string(t) {
                    self.opts.strsize()
                } else {
                    size
                };
                Ok(Typed::konst(self.size_t(), size as i64))
            }
            ExprKind::SizeofExpr(x) => {
                let v = self.expr(x)?;
                if v.bitfield {
                    return Err(derr(
                        "D_SIZEOF_BITFIELD",
                        line,
                        "cannot apply sizeof to a bit-field",
                    ));
                }
                let size = if let Some(s) = &v.str_const {
                    s.len() as u64 + 1
                } else if self.types.is_string(v.ty) {
                    self.opts.strsize()
                } else {
                    self.types.size_of(v.ty)
                };
                if size == 0 || v.action {
                    return Err(derr(
                        "D_SIZEOF_TYPE",
                        line,
                        "cannot apply sizeof to an operand of unknown size",
                    ));
                }
                Ok(Typed::konst(self.size_t(), size as i64))
            }
            ExprKind::Stringof(x) => {
                let v = self.expr(x)?;
                if !self.types.is_scalar(v.ty)
                    && !self.types.is_string(v.ty)
                    && !self.types.is_array(v.ty)
                {
                    return Err(derr(
                        "D_STRINGOF_TYPE",
                        line,
                        format!(
                            "cannot apply stringof to a value of type {}",
                            self.types.name(v.ty)
                        ),
                    ));
                }
                Ok(Typed::rvalue(self.types.string))
            }
            ExprKind::Offsetof(tn, member) => {
                let t = self.type_name(tn)?;
                if !self.types.is_sou(t) || !self.types.is_complete(t) {
                    return Err(derr(
                        "D_OFFSETOF_TYPE",
                        line,
                        "offsetof operand must be a struct or union type",
                    ));
                }
                match self.types.member(t, member) {
                    Some(m) if m.bits.is_some() => Err(derr(
                        "D_OFFSETOF_BITFIELD",
                        line,
                        format!("cannot take offset of a bit-field: {member}"),
                    )),
                    Some(m) => Ok(Typed::konst(self.size_t(), (m.offset_bits / 8) as i64)),
                    None => Err(derr(
                        "D_UNKNOWN",
                        line,
                        format!("failed to determine offset of {member}: Member name not found"),
                    )),
                }
            }
            ExprKind::Xlate(tn, x) => {
                let to = self.type_name(tn)?;
                let v = self.expr(x)?;
                let (out, is_ptr) = match self.types.rkind(to) {
                    TypeKind::Pointer(p) => (*p, true),
                    _ => (to, false),
                };
                if !self.types.is_sou(out) {
                    return Err(derr(
                        "D_XLATE_SOU",
                        line,
                        format!(
                            "translator output type must be a struct or union: {}",
                            self.types.name(to)
                        ),
                    ));
                }
                if self.find_translator(out, v.ty).is_none() {
                    return Err(derr(
                        "D_XLATE_NONE",
                        line,
                        format!(
                            "cannot translate from \"{}\" to \"{}\"",
                            self.types.name(v.ty),
                            self.types.name(to)
                        ),
                    ));
                }
                let _ = is_ptr;
                Ok(Typed::rvalue(to))
            }
        }
    }

    pub(crate) fn find_translator(&self, out: TypeId, input: TypeId) -> Option<usize> {
        let ro = self.types.resolve(out);
        self.translators.iter().position(|t| {
            self.types.resolve(t.output) == ro
                && (self.types.compatible(t.input, input)
                    || (self.types.is_pointer(t.input)
                        && self.types.is_pointer(input)
                        && self.types.compatible(
                            self.types.referent(t.input).unwrap_or(t.input),
                            self.types.referent(input).unwrap_or(input),
                        )))
        })
    }

    pub(crate) fn size_t(&self) -> TypeId {
        self.types.lookup("size_t").unwrap_or(self.types.ulong)
    }

    fn ident(&mut self, name: &str, line: u32) -> DResult<Typed> {
        if let Some(v) = self.globals.get(name) {
            if v.keys.is_some() {
                return Err(derr(
                    "D_IDENT_BADREF",
                    line,
                    format!("array '{name}' may not be referenced as scalar"),
                ));
            }
            return Ok(Typed::var(v.ty));
        }
        if let Some(inl) = self.inlines.get(name).cloned() {
            if inl.opaque {
                return Ok(Typed::rvalue(inl.ty));
            }
            if inl.params.is_some() {
                return Err(derr(
                    "D_IDENT_BADREF",
                    line,
                    format!("inline '{name}' may not be referenced as scalar"),
                ));
            }
            if self.inline_depth > 32 {
                return Err(self.undefined(name, line));
            }
            self.inline_depth += 1;
            let v = self.expr(&inl.value);
            self.inline_depth -= 1;
            let v = v?;
            return Ok(Typed {
                konst: v.konst,
                ..Typed::rvalue(inl.ty)
            });
        }
        if let Some(&(v, ty)) = self.enum_consts.get(name) {
            return Ok(Typed::konst(ty, v));
        }
        let variable = crate::lang::builtins::variable(name);
        if let Some(b) = variable.or_else(|| self.builtin(name)) {
            match b.kind {
                BuiltinKind::Scalar => {
                    let ty = self.type_from_text(b.proto);
                    let writable = b.writable;
                    return Ok(Typed {
                        lvalue: true,
                        writable,
                        ..Typed::rvalue(ty)
                    });
                }
                // dt_xcook_ident: an array built-in named as a scalar
                BuiltinKind::Array => {
                    return Err(derr(
                        "D_IDENT_BADREF",
                        line,
                        format!("associative array '{name}' may not be referenced as scalar"),
                    ))
                }
                BuiltinKind::Subroutine | BuiltinKind::Action | BuiltinKind::AggFunc => {
                    return Err(derr(
                        "D_FUNC_IDKIND",
                        line,
                        format!("{name}( ) may not be used without calling it"),
                    ))
                }
                _ => {}
            }
        }
        if name.contains('`') {
            let why = crate::lang::kernel::kernel_scope(name)
                .map(|_| crate::lang::kernel::why("a kernel variable"))
                .unwrap_or_default();
            return Err(derr(
                "D_IDENT_UNDEF",
                line,
                format!("failed to resolve {name}: Unknown symbol name{why}"),
            ));
        }
        Err(self.undefined(name, line))
    }

    fn var_table(&self, scope: VarScope) -> &std::collections::HashMap<String, VarInfo> {
        match scope {
            VarScope::Global => &self.globals,
            VarScope::Thread => &self.thread_vars,
            VarScope::Clause => &self.clause_vars,
        }
    }

    /// `args[N]->x` (or `.x`, or `*args[N]`) where the clause's probes give `args[]` no
    /// types on this host (Linux live, untyped ETW events, a `pid` function whose prototype
    /// no PDB gives): `args[N]` is then a plain integer, and dtrace's
    /// `dt_idcook_args` would say the index is out of range of a probe without arguments;
    /// said so, with why, rather than "operator -> must be applied to a pointer".
    fn untyped_args_member(&self, base: &Expr, line: u32) -> Option<Diagnostic> {
        let ExprKind::Index { base: b, keys } = &base.kind else {
            return None;
        };
        if !matches!(&b.kind, ExprKind::Ident(n) if n == "args")
            || self.probe_no_args
            || !self.probe_args_untyped
            || keys.len() != 1
        {
            return None;
        }
        let i = match &keys[0].kind {
            ExprKind::Int { value, .. } => *value as i64,
            _ => return None,
        };
        let desc = self.probe_args_desc.clone().unwrap_or_default();
        let why = match &self.probe_args_pid {
            None => String::new(),
            Some((func, t)) => format!(
                "; a pid probe's args[] are typed from its function's prototype in the \
                 target's PDBs, and none gives {func}'s{}",
                match t.why_missing() {
                    w if w.is_empty() => String::new(),
                    w => format!(" ({w})"),
                }
            ),
        };
        Some(derr(
            "D_ARGS_IDX",
            line,
            format!(
                "index {i} is out of range for {desc} args[ ]: {desc} has no typed arguments \
                 here (arg0..arg9 hold their raw values){why}"
            ),
        ))
    }

    fn member(&mut self, base: &Expr, name: &str, arrow: bool, line: u32) -> DResult<Typed> {
        let scope = match base.kind {
            ExprKind::SelfRef if arrow => Some(VarScope::Thread),
            ExprKind::ThisRef if arrow => Some(VarScope::Clause),
            ExprKind::SelfRef | ExprKind::ThisRef => {
                return Err(derr(
                    "D_SYNTAX",
                    line,
                    "self and this must be followed by ->",
                ))
            }
            _ => None,
        };
        if let Some(scope) = scope {
            let prefix = if scope == VarScope::Thread {
                "self"
            } else {
                "this"
            };
            return match self.var_table(scope).get(name) {
                Some(v) if v.keys.is_some() => Err(derr(
                    "D_ARR_BADREF",
                    line,
                    format!("{prefix}->{name}[ ] must be referenced with a subscript"),
                )),
                Some(v) => Ok(Typed::var(v.ty)),
                None => Err(derr(
                    "D_IDENT_UNDEF",
                    line,
                    format!("failed to resolve {prefix}->{name}: Unknown variable name"),
                )),
            };
        }
        let b = self.expr(base)?;
        let op = if arrow { "->" } else { "." };
        if let Some(e) = self.untyped_args_member(base, line) {
            return Err(e);
        }
        let sou = if arrow {
            let Some(r) = self
                .types
                .referent(b.ty)
                .filter(|_| self.types.is_pointer(b.ty))
            else {
                return Err(derr(
                    "D_OP_PTR",
                    line,
                    format!("operator {op} must be applied to a pointer"),
                ));
            };
            if !self.types.is_sou(r) {
                return Err(derr(
                    "D_OP_SOU",
                    line,
                    format!(
                        "operator -> cannot be applied to pointer to type \"{}\"; must be applied to a struct or union pointer",
                        self.types.name(r)
                    ),
                ));
            }
            r
        } else {
            if !self.types.is_sou(b.ty) {
                return Err(derr(
                    "D_OP_SOU",
                    line,
                    format!(
                        "operator . cannot be applied to type \"{}\"; must be applied to a struct or union",
                        self.types.name(b.ty)
                    ),
                ));
            }
            b.ty
        };
        if !self.types.is_complete(sou) {
            return Err(derr(
                "D_OP_INCOMPLETE",
                line,
                format!(
                    "operator {op} cannot be applied to a forward declaration: no {} definition is available{}",
                    self.types.name(sou),
                    if self.kernel_tags.contains(&sou) {
                        crate::lang::kernel::why("a kernel structure")
                    } else {
                        String::new()
                    }
                ),
            ));
        }
        match self.types.member(sou, name).cloned() {
            Some(m) => Ok(Typed {
                lvalue: true,
                writable: b.writable || arrow,
                bitfield: m.bits.is_some(),
                ..Typed::rvalue(m.ty)
            }),
            None => Err(derr(
                "D_TYPE_MEMBER",
                line,
                format!("{name} is not a member of {}", self.types.name(sou)),
            )),
        }
    }

    /// Types associative-array keys against a prototype (or records one).
    fn check_keys(
        &mut self,
        name: &str,
        proto: &[TypeId],
        keys: &[Typed],
        line: u32,
    ) -> DResult<()> {
        if proto.len() != keys.len() {
            return Err(derr(
                "D_PROTO_LEN",
                line,
                format!(
                    "{name}[ ] prototype mismatch: {} key{}passed, {} expected",
                    keys.len(),
                    if keys.len() == 1 { " " } else { "s " },
                    proto.len()
                ),
            ));
        }
        for (i, (p, k)) in proto.iter().zip(keys).enumerate() {
            if !self.assignable(*p, k) {
                return Err(derr(
                    "D_PROTO_ARG",
                    line,
                    format!(
                        "{name}[ ] key #{} is incompatible with prototype:\n\tprototype: {}\n\t      key: {}",
                        i + 1,
                        self.types.name(*p),
                        self.types.name(k.ty)
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn key_types(&mut self, keys: &[Expr]) -> DResult<Vec<Typed>> {
        let mut v = Vec::new();
        for k in keys {
            let t = self.expr(k)?;
            if t.action || self.types.is_void(t.ty) {
                return Err(derr(
                    "D_KEY_TYPE",
                    k.line,
                    "key expression may not be of type void",
                ));
            }
            v.push(t);
        }
        Ok(v)
    }

    /// `base[keys]`: associative arrays, `args[]`/`uregs[]`, pointers and arrays.
    pub(crate) fn index(
        &mut self,
        base: &Expr,
        keys: &[Expr],
        line: u32,
        creating: bool,
    ) -> DResult<Typed> {
        // variable-like bases
        let var = match &base.kind {
            ExprKind::Ident(n) => Some((VarScope::Global, n.clone(), n.clone())),
            ExprKind::Member {
                base: b,
                name,
                arrow: true,
            } => match b.kind {
                ExprKind::SelfRef => {
                    Some((VarScope::Thread, name.clone(), format!("self->{name}")))
                }
                ExprKind::ThisRef => {
                    Some((VarScope::Clause, name.clone(), format!("this->{name}")))
                }
                _ => None,
            },
            _ => None,
        };
        if let Some((scope, name, shown)) = var {
            if scope == VarScope::Global {
                if let Some(b) = self.builtin(&name) {
                    if b.kind == BuiltinKind::Array && !self.globals.contains_key(&name) {
                        return self.builtin_array(&name, keys, line);
                    }
                }
            }
            let info = self.var_table(scope).get(&name).cloned();
            match info {
                Some(v) if v.keys.is_some() => {
                    let kt = self.key_types(keys)?;
                    let proto = v.keys.clone().unwrap_or_default();
                    self.check_keys(&shown, &proto, &kt, line)?;
                    return Ok(Typed::var(v.ty));
                }
                Some(_) => {} // a scalar variable: pointer/array indexing below
                None if scope == VarScope::Global
                    && self.inlines.get(&name).is_some_and(|i| i.params.is_some()) =>
                {
                    let inl = self.inlines[&name].clone();
                    let kt = self.key_types(keys)?;
                    let proto: Vec<TypeId> =
                        inl.params.unwrap_or_default().iter().map(|p| p.1).collect();
                    self.check_keys(&shown, &proto, &kt, line)?;
                    return Ok(Typed::rvalue(inl.ty));
                }
                // a scalar built-in (`probename[0]`, `execname[0]`): dt_cook_op2 rewrites
                // E1[E2] as *(E1 + E2) when E1 is no associative array
                None if scope == VarScope::Global
                    && (self.inlines.contains_key(&name)
                        || self.enum_consts.contains_key(&name)
                        || self.builtin(&name).is_some()) => {}
                None => {
                    if creating {
                        self.key_types(keys)?;
                        return Ok(Typed::var(self.types.int64));
                    }
                    return Err(derr(
                        "D_IDENT_UNDEF",
                        line,
                        format!("failed to resolve {shown}: Unknown variable name"),
                    ));
                }
            }
        }
        let b = self.expr(base)?;
        if keys.len() != 1 {
            // dt_cook_op2: E1[E2, E3] on anything but an associative array, named by
            // dt_node_name
            let what = match &base.kind {
                ExprKind::Ident(n) => format!("scalar {n}"),
                _ => "a scalar".to_string(),
            };
            return Err(derr(
                "D_ARR_BADREF",
                line,
                format!("cannot access {what} as an associative array"),
            ));
        }
        let k = self.expr(&keys[0])?;
        if self.types.is_string(b.ty) {
            if !self.types.is_integer(k.ty) {
                return Err(derr(
                    "D_OP_INT",
                    line,
                    "operator [ ] requires operands of integral type",
                ));
            }
            return Ok(Typed {
                lvalue: true,
                writable: b.writable,
                ..Typed::rvalue(self.types.char)
            });
        }
        let Some(elem) = self.types.referent(b.ty) else {
            return Err(derr(
                "D_OP_ARRFUN",
                line,
                format!(
                    "operator [ ] may not be applied to operand of type \"{}\"",
                    self.types.name(b.ty)
                ),
            ));
        };
        if !self.types.is_integer(k.ty) {
            return Err(derr(
                "D_OP_INT",
                line,
                "operator [ ] requires operands of integral type",
            ));
        }
        if self.types.is_void(elem) {
            return Err(derr(
                "D_DEREF_VOID",
                line,
                "cannot dereference pointer to void",
            ));
        }
        Ok(Typed {
            lvalue: true,
            writable: true,
            ..Typed::rvalue(elem)
        })
    }

    fn builtin_array(&mut self, name: &str, keys: &[Expr], line: u32) -> DResult<Typed> {
        if keys.len() != 1 {
            return Err(derr(
                "D_PROTO_LEN",
                line,
                format!(
                    "{name}[ ] prototype mismatch: {} arg{}passed, 1 expected",
                    keys.len(),
                    if keys.len() == 1 { " " } else { "s " }
                ),
            ));
        }
        let k = self.expr(&keys[0])?;
        if !self.types.is_integer(k.ty) || (name == "uregs" && k.konst.is_none()) {
            return Err(derr(
                "D_PROTO_ARG",
                line,
                format!(
                    "{name}[ ] argument #1 is incompatible with prototype:\n\tprototype: integer constant\n\t argument: {}",
                    self.types.name(k.ty)
                ),
            ));
        }
        if name == "args" {
            let idx = k.konst;
            // dt_ident.c, dt_idcook_args: "index N is out of range for <desc> args[ ]"
            let out_of_range = |i: i64, c: &Self| {
                let desc = c.probe_args_desc.clone().unwrap_or_default();
                derr(
                    "D_ARGS_IDX",
                    line,
                    format!("index {i} is out of range for {desc} args[ ]"),
                )
            };
            let ty = match (&self.probe_args, idx) {
                (_, Some(i)) if self.probe_no_args => return Err(out_of_range(i, self)),
                (Some(a), Some(i)) if i >= 0 && (i as usize) < a.len() => a[i as usize],
                (Some(a), Some(i)) if !a.is_empty() => return Err(out_of_range(i, self)),
                _ => self.types.int64,
            };
            return Ok(Typed::rvalue(ty));
        }
        if name == "uregs" {
            if let Some(i) = k.konst {
                if !(0..=64).contains(&i) {
                    return Err(derr(
                        "D_IDENT_UNDEF",
                        line,
                        format!("failed to resolve uregs[{i}]: Unknown register"),
                    ));
                }
            }
        }
        Ok(Typed::rvalue(self.types.uint64))
    }

    fn unary(&mut self, op: UnOp, x: &Expr, line: u32) -> DResult<Typed> {
        let opname = match op {
            UnOp::Neg => "-",
            UnOp::Plus => "+",
            UnOp::Not => "!",
            UnOp::BitNot => "~",
            UnOp::Deref => "*",
            UnOp::AddrOf => "&",
            UnOp::PreInc | UnOp::PostInc => "++",
            UnOp::PreDec | UnOp::PostDec => "--",
        };
        if matches!(
            op,
            UnOp::PreInc | UnOp::PreDec | UnOp::PostInc | UnOp::PostDec
        ) {
            // an increment creates a variable that does not exist yet, as a 64-bit integer
            let int = Typed::konst(self.types.int64, 0);
            self.create_var(x, &int, line)?;
            let v = self.lvalue_target(x, line, opname)?;
            if !self.types.is_scalar(v.ty) {
                return Err(derr(
                    "D_OP_SCALAR",
                    line,
                    format!("operator {opname} requires operand of scalar type"),
                ));
            }
            if let Some(r) = self.types.referent(v.ty) {
                if self.types.size_of(r) == 0 {
                    return Err(derr(
                        "D_OP_VFPTR",
                        line,
                        format!("operator {opname} requires an operand of known size"),
                    ));
                }
            }
            return Ok(Typed::rvalue(v.ty));
        }
        let v = self.expr(x)?;
        let t = &self.types;
        match op {
            UnOp::Neg | UnOp::Plus => {
                if !t.is_arith(v.ty) {
                    return Err(derr(
                        "D_OP_ARITH",
                        line,
                        format!("operator {opname} requires an operand of arithmetic type"),
                    ));
                }
                let ty = t.promote(v.ty);
                let konst = v
                    .konst
                    .map(|k| if op == UnOp::Neg { k.wrapping_neg() } else { k });
                Ok(Typed {
                    konst,
                    ..Typed::rvalue(ty)
                })
            }
            UnOp::BitNot => {
                if !t.is_integer(v.ty) {
                    return Err(derr(
                        "D_OP_INT",
                        line,
                        format!("operator {opname} requires an operand of integral type"),
                    ));
                }
                let ty = t.promote(v.ty);
                let konst = v
                    .konst
                    .map(|k| truncate(!k, t.size_of(ty), t.is_signed(ty)));
                Ok(Typed {
                    konst,
                    ..Typed::rvalue(ty)
                })
            }
            UnOp::Not => {
                if !t.is_scalar(v.ty) {
                    return Err(derr(
                        "D_OP_SCALAR",
                        line,
                        format!("operator {opname} requires an operand of scalar type"),
                    ));
                }
                Ok(Typed {
                    konst: v.konst.map(|k| (k == 0) as i64),
                    ..Typed::rvalue(t.int)
                })
            }
            UnOp::Deref => {
                if !t.is_pointer(v.ty) && !t.is_array(v.ty) {
                    if let Some(e) = self.untyped_args_member(x, line) {
                        return Err(e);
                    }
                    return Err(derr(
                        "D_DEREF_NONPTR",
                        line,
                        "cannot dereference non-pointer type",
                    ));
                }
                let r = t.referent(v.ty).unwrap_or(t.void);
                if t.is_void(r) {
                    return Err(derr(
                        "D_DEREF_VOID",
                        line,
                        "cannot dereference pointer to void",
                    ));
                }
                if t.is_function(r) {
                    return Err(derr(
                        "D_DEREF_FUNC",
                        line,
                        "cannot dereference pointer to function",
                    ));
                }
                Ok(Typed {
                    lvalue: true,
                    writable: true,
                    ..Typed::rvalue(r)
                })
            }
            UnOp::AddrOf => {
                if v.dvar {
                    return Err(derr(
                        "D_ADDROF_VAR",
                        line,
                        "cannot take address of dynamic variable",
                    ));
                }
                if v.bitfield {
                    return Err(derr(
                        "D_ADDROF_BITFIELD",
                        line,
                        "cannot take address of bit-field",
                    ));
                }
                if !v.lvalue {
                    return Err(derr(
                        "D_ADDROF_LVAL",
                        line,
                        "unacceptable operand for unary & operator",
                    ));
                }
                let ty = v.ty;
                let p = self.types.pointer_to(ty);
                Ok(Typed::rvalue(p))
            }
            _ => unreachable!("increment handled above"),
        }
    }

    /// Types the target of an assignment or increment, creating D variables on first use.
    fn lvalue_target(&mut self, x: &Expr, line: u32, opname: &str) -> DResult<Typed> {
        let v = match &x.kind {
            ExprKind::Ident(n)
                if !self.globals.contains_key(n)
                    && self.builtin(n).is_none()
                    && !self.inlines.contains_key(n)
                    && !self.enum_consts.contains_key(n) =>
            {
                // created by the assignment; typed by the caller
                return Ok(Typed::var(self.types.int64));
            }
            ExprKind::Member {
                base,
                name,
                arrow: true,
            } if matches!(base.kind, ExprKind::SelfRef | ExprKind::ThisRef) => {
                let scope = if matches!(base.kind, ExprKind::SelfRef) {
                    VarScope::Thread
                } else {
                    VarScope::Clause
                };
                match self.var_table(scope).get(name) {
                    Some(v) => Typed::var(v.ty),
                    None => return Ok(Typed::var(self.types.int64)),
                }
            }
            ExprKind::Index { base, keys } => self.index(base, keys, line, true)?,
            ExprKind::Agg(_) => {
                return Err(derr(
                    "D_OP_LVAL",
                    line,
                    format!("operator {opname} requires modifiable lvalue as an operand"),
                ))
            }
            _ => self.expr(x)?,
        };
        if !v.lvalue {
            return Err(derr(
                "D_OP_LVAL",
                line,
                format!("operator {opname} requires modifiable lvalue as an operand"),
            ));
        }
        if !v.writable || self.types.is_const(v.ty) {
            return Err(derr(
                "D_OP_WRITE",
                line,
                format!("operator {opname} can only be applied to a writable variable"),
            ));
        }
        Ok(v)
    }

    fn binary(&mut self, op: BinOp, a: &Expr, b: &Expr, line: u32) -> DResult<Typed> {
        let ta = self.expr(a)?;
        if op == BinOp::Comma {
            let tb = self.expr(b)?;
            return Ok(Typed::rvalue(tb.ty));
        }
        let tb = self.expr(b)?;
        self.binary_types(op, &ta, &tb, line)
    }

    pub(crate) fn binary_types(
        &mut self,
        op: BinOp,
        ta: &Typed,
        tb: &Typed,
        line: u32,
    ) -> DResult<Typed> {
        let t = &self.types;
        let ops = op.text();
        use BinOp::*;
        match op {
            Mul | Div | Mod => {
                let int_only = op == Mod;
                let ok = if int_only {
                    t.is_integer(ta.ty) && t.is_integer(tb.ty)
                } else {
                    t.is_arith(ta.ty) && t.is_arith(tb.ty)
                };
                if !ok {
                    return Err(if int_only {
                        derr(
                            "D_OP_INT",
                            line,
                            format!("operator {ops} requires operands of integral type"),
                        )
                    } else {
                        derr(
                            "D_OP_ARITH",
                            line,
                            format!("operator {ops} requires operands of arithmetic type"),
                        )
                    });
                }
                if matches!(op, Div | Mod) && tb.konst == Some(0) {
                    return Err(derr(
                        "D_DIV_ZERO",
                        line,
                        "expression contains division by zero",
                    ));
                }
                let ty = t.arith_result(ta.ty, tb.ty);
                let konst = fold(op, ta.konst, tb.konst, t.is_signed(ty));
                Ok(Typed {
                    konst,
                    ..Typed::rvalue(ty)
                })
            }
            Add | Sub => {
                // dt_cook_op2, DT_TOK_ADD/SUB: "D permits strings to be treated as pointers"
                // (`"hello" + 1` is "ello")
                // an aggregation's value has a dynamic type (dt_cook_aggregation), neither
                // integer nor pointer; dt_node_type_name calls it "aggregation"
                if ta.agg.is_some() || tb.agg.is_some() {
                    let name = |x: &Typed| match x.agg {
                        Some(_) => "aggregation".to_string(),
                        None => t.name(x.ty),
                    };
                    return Err(incompat(line, &name(ta), ops, &name(tb)));
                }
                let (sa, sb) = (t.is_string(ta.ty), t.is_string(tb.ty));
                if (sa && t.is_integer(tb.ty)) || (sb && t.is_integer(ta.ty) && op == Add) {
                    return Ok(Typed::rvalue(t.string));
                }
                let pa = t.is_pointer(ta.ty) || t.is_array(ta.ty);
                let pb = t.is_pointer(tb.ty) || t.is_array(tb.ty);
                if pa && pb {
                    if op == Sub && t.compatible(ta.ty, tb.ty) {
                        return Ok(Typed::rvalue(t.lookup("ptrdiff_t").unwrap_or(t.long)));
                    }
                    return Err(incompat(line, &t.name(ta.ty), ops, &t.name(tb.ty)));
                }
                if pa || pb {
                    let (p, other) = if pa { (ta, tb) } else { (tb, ta) };
                    if !t.is_integer(other.ty) || (pb && op == Sub) {
                        return Err(incompat(line, &t.name(ta.ty), ops, &t.name(tb.ty)));
                    }
                    let r = t.referent(p.ty).unwrap_or(t.void);
                    if t.is_void(r) {
                        return Err(incompat(line, &t.name(ta.ty), ops, &t.name(tb.ty)));
                    }
                    if t.size_of(r) == 0 {
                        return Err(derr(
                            "D_OP_VFPTR",
                            line,
                            format!(
                                "operator {ops} requires left-hand scalar operand of known size"
                            ),
                        ));
                    }
                    let pty = if t.is_array(p.ty) {
                        self.types.pointer_to(r)
                    } else {
                        p.ty
                    };
                    return Ok(Typed::rvalue(pty));
                }
                // dt_cook_op2: neither two integers nor a pointer and an integer
                if !t.is_arith(ta.ty) || !t.is_arith(tb.ty) {
                    return Err(incompat(line, &t.name(ta.ty), ops, &t.name(tb.ty)));
                }
                let ty = t.arith_result(ta.ty, tb.ty);
                let konst = fold(op, ta.konst, tb.konst, t.is_signed(ty));
                Ok(Typed {
                    konst,
                    ..Typed::rvalue(ty)
                })
            }
            Shl | Shr | BitAnd | BitOr | BitXor => {
                if !t.is_integer(ta.ty) || !t.is_integer(tb.ty) {
                    return Err(derr(
                        "D_OP_INT",
                        line,
                        format!("operator {ops} requires operands of integral type"),
                    ));
                }
                let ty = if matches!(op, Shl | Shr) {
                    t.promote(ta.ty)
                } else {
                    t.arith_result(ta.ty, tb.ty)
                };
                let konst = fold(op, ta.konst, tb.konst, t.is_signed(ty));
                Ok(Typed {
                    konst,
                    ..Typed::rvalue(ty)
                })
            }
            And | Or | Xor => {
                let sa = t.is_scalar(ta.ty);
                let sb = t.is_scalar(tb.ty);
                if !sa || !sb {
                    return Err(derr(
                        "D_OP_SCALAR",
                        line,
                        format!("operator {ops} requires operands of scalar type"),
                    ));
                }
                let konst = match (ta.konst, tb.konst) {
                    (Some(x), Some(y)) => Some(match op {
                        And => (x != 0 && y != 0) as i64,
                        Or => (x != 0 || y != 0) as i64,
                        _ => ((x != 0) ^ (y != 0)) as i64,
                    }),
                    _ => None,
                };
                Ok(Typed {
                    konst,
                    ..Typed::rvalue(t.int)
                })
            }
            Lt | Gt | Le | Ge | Eq | Ne => {
                let ok = (t.is_arith(ta.ty) && t.is_arith(tb.ty))
                    || (self.is_strcompat(ta.ty) && self.is_strcompat(tb.ty))
                    || self.ptr_compatible(ta.ty, ta.konst, tb.ty, tb.konst);
                let t = &self.types;
                if !ok {
                    return Err(incompat(line, &t.name(ta.ty), ops, &t.name(tb.ty)));
                }
                let signed = t.is_arith(ta.ty)
                    && t.is_arith(tb.ty)
                    && t.is_signed(t.arith_result(ta.ty, tb.ty));
                let konst = match (ta.konst, tb.konst) {
                    (Some(x), Some(y)) => Some(compare(op, x, y, signed) as i64),
                    _ => None,
                };
                Ok(Typed {
                    konst,
                    ..Typed::rvalue(t.int)
                })
            }
            Comma => Ok(Typed::rvalue(tb.ty)),
        }
    }

    fn assign(&mut self, op: AssignOp, a: &Expr, b: &Expr, line: u32) -> DResult<Typed> {
        let opname = match op {
            None => "=".to_string(),
            Some(o) => format!("{}=", o.text()),
        };
        if let ExprKind::Agg(_) = a.kind {
            return Err(derr(
                "D_OP_LVAL",
                line,
                format!("operator {opname} requires modifiable lvalue as an operand"),
            ));
        }
        if op.is_some() {
            let undefined = match &a.kind {
                ExprKind::Ident(n) => (!self.globals.contains_key(n)
                    && self.builtin(n).is_none()
                    && !self.inlines.contains_key(n)
                    && !self.enum_consts.contains_key(n))
                .then(|| n.clone()),
                ExprKind::Member {
                    base,
                    name,
                    arrow: true,
                } => match base.kind {
                    ExprKind::SelfRef if !self.thread_vars.contains_key(name) => {
                        Some(format!("self->{name}"))
                    }
                    ExprKind::ThisRef if !self.clause_vars.contains_key(name) => {
                        Some(format!("this->{name}"))
                    }
                    _ => None,
                },
                _ => None,
            };
            if let Some(n) = undefined {
                return Err(derr(
                    "D_VAR_UNDEF",
                    line,
                    format!("{n} has not yet been declared or assigned"),
                ));
            }
            let lhs = self.lvalue_target(a, line, &opname)?;
            let rhs = self.expr(b)?;
            if self.types.is_string(lhs.ty) || self.types.is_string(rhs.ty) {
                return Err(incompat(
                    line,
                    &self.types.name(lhs.ty),
                    &opname,
                    &self.types.name(rhs.ty),
                ));
            }
            let bop = op.unwrap_or(BinOp::Add);
            if matches!(bop, BinOp::Add | BinOp::Sub) {
                let t = &self.types;
                if !(t.is_integer(lhs.ty) && t.is_integer(rhs.ty)) {
                    let vf = t.referent(lhs.ty).is_none_or(|r| t.size_of(r) == 0);
                    if !t.is_pointer(lhs.ty) || vf {
                        return Err(derr(
                            "D_OP_VFPTR",
                            line,
                            format!(
                                "operator {opname} requires left-hand scalar operand of known size"
                            ),
                        ));
                    }
                    if !t.is_integer(rhs.ty) && !t.compatible(lhs.ty, rhs.ty) {
                        return Err(incompat(line, &t.name(lhs.ty), &opname, &t.name(rhs.ty)));
                    }
                }
                return Ok(Typed::rvalue(lhs.ty));
            }
            self.binary_types(bop, &lhs, &rhs, line)?;
            return Ok(Typed::rvalue(lhs.ty));
        }
        let rhs = self.expr(b)?;
        if rhs.action {
            return Err(derr(
                "D_OP_ACT",
                line,
                format!("operator {opname} operands cannot be actions"),
            ));
        }
        if rhs.agg.is_some() {
            return Err(derr(
                "D_AGG_SCALAR",
                line,
                "aggregation may not be used as a scalar value",
            ));
        }
        // creation of D variables by their first assignment
        if op.is_none() {
            if let Some(done) = self.create_var(a, &rhs, line)? {
                return Ok(done);
            }
        }
        let lhs = self.lvalue_target(a, line, &opname)?;
        if (self.types.is_array(lhs.ty) || self.types.is_function(lhs.ty))
            && !self.types.is_string(lhs.ty)
        {
            return Err(derr(
                "D_OP_ARRFUN",
                line,
                format!(
                    "operator {opname} may not be applied to operand of type \"{}\"",
                    self.types.name(lhs.ty)
                ),
            ));
        }
        if let Some(o) = op {
            self.binary_types(o, &lhs, &rhs, line)?;
            return Ok(Typed::rvalue(lhs.ty));
        }
        // a struct or union is assigned by copy wherever it is stored, a member too
        // (dt_cg_asgn_op stores a by-reference value with COPYS, dt_cg_store)
        if !self.assignable(lhs.ty, &rhs) {
            return Err(incompat(
                line,
                &self.types.name(lhs.ty),
                "=",
                &self.types.name(rhs.ty),
            ));
        }
        Ok(Typed::rvalue(lhs.ty))
    }

    /// `x = e`, `self->x = e`, `this->x = e`, `a[k] = e` on a variable not yet known creates it
    /// with the value's type. Returns `None` when the target already exists.
    fn create_var(&mut self, a: &Expr, rhs: &Typed, line: u32) -> DResult<Option<Typed>> {
        let ty = self.storage_type(rhs);
        if self.types.is_void(rhs.ty) {
            return Err(derr(
                "D_OP_VOID",
                line,
                "operator = cannot be applied to a void expression",
            ));
        }
        match &a.kind {
            ExprKind::Ident(n) => {
                if self.globals.contains_key(n)
                    || self.builtin(n).is_some()
                    || self.inlines.contains_key(n)
                    || self.enum_consts.contains_key(n)
                {
                    return Ok(None);
                }
                if n.contains('`') {
                    let why = crate::lang::kernel::kernel_scope(n)
                        .map(|_| crate::lang::kernel::why("a kernel variable"))
                        .unwrap_or_default();
                    return Err(derr(
                        "D_IDENT_UNDEF",
                        line,
                        format!("failed to resolve {n}: Unknown symbol name{why}"),
                    ));
                }
                let id = self.new_var_id();
                self.globals.insert(
                    n.clone(),
                    VarInfo {
                        ty,
                        keys: None,
                        scope: VarScope::Global,
                        declared: false,
                        id,
                    },
                );
                Ok(Some(Typed::rvalue(ty)))
            }
            ExprKind::Member {
                base,
                name,
                arrow: true,
            } if matches!(base.kind, ExprKind::SelfRef | ExprKind::ThisRef) => {
                let scope = if matches!(base.kind, ExprKind::SelfRef) {
                    VarScope::Thread
                } else {
                    VarScope::Clause
                };
                if self.var_table(scope).contains_key(name) {
                    return Ok(None);
                }
                let id = self.new_var_id();
                let info = VarInfo {
                    ty,
                    keys: None,
                    scope,
                    declared: false,
                    id,
                };
                match scope {
                    VarScope::Thread => self.thread_vars.insert(name.clone(), info),
                    _ => self.clause_vars.insert(name.clone(), info),
                };
                Ok(Some(Typed::rvalue(ty)))
            }
            ExprKind::Index { base, keys } => {
                let (scope, name) = match &base.kind {
                    ExprKind::Ident(n) => (VarScope::Global, n.clone()),
                    ExprKind::Member {
                        base: b,
                        name,
                        arrow: true,
                    } if matches!(b.kind, ExprKind::SelfRef) => (VarScope::Thread, name.clone()),
                    ExprKind::Member {
                        base: b,
                        name,
                        arrow: true,
                    } if matches!(b.kind, ExprKind::ThisRef) => {
                        if !self.clause_vars.contains_key(name) {
                            return Err(derr(
                                "D_ARR_LOCAL",
                                line,
                                format!(
                                    "local variables may not be used as associative arrays: {name}"
                                ),
                            ));
                        }
                        return Ok(None);
                    }
                    _ => return Ok(None),
                };
                if self.var_table(scope).contains_key(&name)
                    || (scope == VarScope::Global
                        && (self.builtin(&name).is_some()
                            || self.inlines.contains_key(&name)
                            || self.enum_consts.contains_key(&name)))
                {
                    return Ok(None);
                }
                let kt = self.key_types(keys)?;
                let key_types: Vec<TypeId> = kt.iter().map(|k| self.storage_type(k)).collect();
                let id = self.new_var_id();
                let info = VarInfo {
                    ty,
                    keys: Some(key_types),
                    scope,
                    declared: false,
                    id,
                };
                match scope {
                    VarScope::Thread => self.thread_vars.insert(name, info),
                    _ => self.globals.insert(name, info),
                };
                Ok(Some(Typed::rvalue(ty)))
            }
            _ => Ok(None),
        }
    }

    /// The type a D variable gets from a value: char arrays and pointers stay as they are,
    /// string literals are strings.
    pub(crate) fn storage_type(&self, v: &Typed) -> TypeId {
        v.ty
    }
}

fn fold(op: BinOp, a: Option<i64>, b: Option<i64>, signed: bool) -> Option<i64> {
    let (x, y) = (a?, b?);
    use BinOp::*;
    Some(match op {
        Mul => x.wrapping_mul(y),
        Div => {
            if y == 0 {
                return None;
            }
            if signed {
                x.wrapping_div(y)
            } else {
                ((x as u64) / (y as u64)) as i64
            }
        }
        Mod => {
            if y == 0 {
                return None;
            }
            if signed {
                x.wrapping_rem(y)
            } else {
                ((x as u64) % (y as u64)) as i64
            }
        }
        Add => x.wrapping_add(y),
        Sub => x.wrapping_sub(y),
        Shl => x.wrapping_shl(y as u32),
        Shr => {
            if signed {
                x.wrapping_shr(y as u32)
            } else {
                ((x as u64).wrapping_shr(y as u32)) as i64
            }
        }
        BitAnd => x & y,
        BitOr => x | y,
        BitXor => x ^ y,
        _ => return None,
    })
}

fn compare(op: BinOp, x: i64, y: i64, signed: bool) -> bool {
    use std::cmp::Ordering;
    let ord = if signed {
        x.cmp(&y)
    } else {
        (x as u64).cmp(&(y as u64))
    };
    match op {
        BinOp::Lt => ord == Ordering::Less,
        BinOp::Gt => ord == Ordering::Greater,
        BinOp::Le => ord != Ordering::Greater,
        BinOp::Ge => ord != Ordering::Less,
        BinOp::Eq => ord == Ordering::Equal,
        _ => ord != Ordering::Equal,
    }
}

/// Truncates a constant to a type's width, sign- or zero-extending it back to 64 bits.
pub fn truncate(v: i64, size: u64, signed: bool) -> i64 {
    match (size, signed) {
        (1, true) => v as i8 as i64,
        (1, false) => v as u8 as i64,
        (2, true) => v as i16 as i64,
        (2, false) => v as u16 as i64,
        (4, true) => v as i32 as i64,
        (4, false) => v as u32 as i64,
        _ => v,
    }
}

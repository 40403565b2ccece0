//! Declarations: from declaration specifiers and declarators to types; typedefs, struct/union/
//! enum definitions, variable declarations, inlines, translators and provider definitions.

use super::{Checker, InlineInfo, Translator, VarInfo, VarScope};
use crate::lang::ast::*;
use crate::lang::diag::{derr, DResult};
use crate::lang::types::{Member, SouTag, TypeId, TypeKind};

impl Checker<'_> {
    /// The base type named by declaration specifiers.
    pub(crate) fn base_type(&mut self, s: &DeclSpecs) -> DResult<TypeId> {
        let line = s.line;
        let has_attr = s.shorts > 0 || s.longs > 0 || s.signed || s.unsigned;
        let mut ty = match &s.base {
            None | Some(BaseSpec::Int) => {
                let mut name = String::new();
                if s.unsigned {
                    name.push_str("unsigned ");
                } else if s.signed && s.base.is_none() && s.shorts == 0 && s.longs == 0 {
                    name.push_str("signed ");
                }
                let core = match (s.shorts, s.longs) {
                    (0, 0) => "int",
                    (1, 0) => "short",
                    (0, 1) => "long",
                    (0, 2) => "long long",
                    _ => "",
                };
                if core.is_empty() || (s.signed && s.unsigned) {
                    return Err(derr(
                        "D_UNKNOWN",
                        line,
                        "invalid type combination: conflicting type attributes",
                    ));
                }
                name.push_str(core);
                self.types
                    .lookup(name.trim_start_matches("signed "))
                    .or_else(|| self.types.lookup(&name))
                    .unwrap_or(self.types.int)
            }
            Some(BaseSpec::Char) => {
                if s.shorts > 0 || s.longs > 0 {
                    return Err(derr(
                        "D_DECL_CHARATTR",
                        line,
                        "invalid type declaration: short and long may not be used with char type",
                    ));
                }
                let n = if s.unsigned {
                    "unsigned char"
                } else if s.signed {
                    "signed char"
                } else {
                    "char"
                };
                self.types.lookup(n).unwrap_or(self.types.char)
            }
            Some(BaseSpec::Void) => {
                if has_attr {
                    return Err(derr(
                        "D_DECL_VOIDATTR",
                        line,
                        "invalid type declaration: attributes may not be used with void type",
                    ));
                }
                self.types.void
            }
            Some(BaseSpec::Float) | Some(BaseSpec::Double) => {
                if s.signed || s.unsigned {
                    return Err(derr(
                        "D_DECL_SIGNINT",
                        line,
                        "invalid type declaration: signed and unsigned may only be used with integer type",
                    ));
                }
                let n = match (&s.base, s.longs) {
                    (Some(BaseSpec::Float), 0) => "float",
                    (Some(BaseSpec::Double), 0) => "double",
                    (Some(BaseSpec::Double), 1) => "long double",
                    _ => {
                        return Err(derr(
                            "D_UNKNOWN",
                            line,
                            "invalid type combination: conflicting type attributes",
                        ))
                    }
                };
                self.types.lookup(n).unwrap_or(self.types.int)
            }
            Some(other) => {
                if s.signed || s.unsigned {
                    return Err(derr(
                        "D_DECL_SIGNINT",
                        line,
                        "invalid type declaration: signed and unsigned may only be used with integer type",
                    ));
                }
                if s.shorts > 0 || s.longs > 0 {
                    return Err(derr(
                        "D_DECL_LONGINT",
                        line,
                        "invalid type declaration: long and long long may only be used with integer or floating-point type",
                    ));
                }
                match other {
                    BaseSpec::String => self.types.string,
                    BaseSpec::Named(n) => {
                        match self.target_type(n).or_else(|| self.types.lookup(n)) {
                            Some(t) => t,
                            None => {
                                let why = if crate::lang::target_types::pid_scoped(n).is_some() {
                                    crate::lang::target_types::why_unknown(
                                        self.target_types.as_deref(),
                                    )
                                } else {
                                    crate::lang::kernel::kernel_scope(n)
                                        .map(|_| crate::lang::kernel::why("a kernel type"))
                                        .unwrap_or_default()
                                };
                                return Err(derr(
                                    "D_TYPE_ERR",
                                    line,
                                    format!("failed to resolve type {n}: Unknown type name{why}"),
                                ));
                            }
                        }
                    }
                    BaseSpec::Sou {
                        kind,
                        name,
                        members,
                    } => self.sou(*kind, name.as_deref(), members.as_deref(), line)?,
                    BaseSpec::Enum { name, enumerators } => {
                        self.enum_def(name.as_deref(), enumerators.as_deref(), line)?
                    }
                    _ => self.types.int,
                }
            }
        };
        if s.is_const {
            ty = self.types.add(TypeKind::Const(ty));
        }
        if s.is_volatile {
            ty = self.types.add(TypeKind::Volatile(ty));
        }
        Ok(ty)
    }

    /// Applies a declarator to a base type, giving the declared name and its type.
    pub(crate) fn apply_declarator(
        &mut self,
        base: TypeId,
        d: &Declarator,
    ) -> DResult<(Option<String>, TypeId, Option<Vec<TypeId>>)> {
        let mut keys = None;
        let (name, ty) = self.apply_inner(base, d, &mut keys)?;
        Ok((name, ty, keys))
    }

    fn apply_inner(
        &mut self,
        base: TypeId,
        d: &Declarator,
        keys: &mut Option<Vec<TypeId>>,
    ) -> DResult<(Option<String>, TypeId)> {
        match d {
            Declarator::Name { name, .. } => Ok((name.clone(), base)),
            Declarator::Pointer {
                inner,
                is_const,
                is_volatile,
            } => {
                let mut p = self.types.pointer_to(base);
                if *is_const {
                    p = self.types.add(TypeKind::Const(p));
                }
                if *is_volatile {
                    p = self.types.add(TypeKind::Volatile(p));
                }
                self.apply_inner(p, inner, keys)
            }
            Declarator::Array { inner, size } => {
                let line = d.line();
                let t = match size {
                    ArraySize::None => {
                        if self.types.is_void(base) {
                            return Err(derr(
                                "D_DECL_VOIDOBJ",
                                line,
                                "cannot declare array of void",
                            ));
                        }
                        self.types.array_of(base, 0)
                    }
                    ArraySize::Expr(e) => {
                        if self.types.is_void(base) {
                            return Err(derr(
                                "D_DECL_VOIDOBJ",
                                line,
                                "cannot declare array of void",
                            ));
                        }
                        let v = self.const_int(e)?;
                        match v {
                            Some(v) if v > 0 => {
                                if v as u64 > u32::MAX as u64 {
                                    return Err(derr(
                                        "D_DECL_ARRBIG",
                                        line,
                                        "array dimension too big",
                                    ));
                                }
                                self.types.array_of(base, v as u64)
                            }
                            _ => {
                                return Err(derr(
                                    "D_DECL_ARRSUB",
                                    line,
                                    "positive integral constant expression or tuple signature expected as array declaration subscript",
                                ))
                            }
                        }
                    }
                    ArraySize::Keys(tns) => {
                        let mut ks = Vec::new();
                        for (i, tn) in tns.iter().enumerate() {
                            let k = self.type_name(tn)?;
                            if self.types.is_void(k) {
                                return Err(derr(
                                    "D_DECL_PROTO_TYPE",
                                    line,
                                    // dt_decl.c, dt_decl_prototype for an array's keys
                                    format!(
                                        "array prototype may not use parameter of type void: \
                                         (anonymous), parameter #{}",
                                        i + 1
                                    ),
                                ));
                            }
                            ks.push(k);
                        }
                        if keys.is_some() {
                            return Err(derr(
                                "D_DECL_DYNOBJ",
                                line,
                                "cannot declare dynamic array of associative arrays",
                            ));
                        }
                        *keys = Some(ks);
                        base
                    }
                };
                self.apply_inner(t, inner, keys)
            }
            Declarator::Function {
                inner,
                params,
                varargs,
            } => {
                let nvoid = params
                    .iter()
                    .filter(|p| {
                        matches!(p.specs.base, Some(BaseSpec::Void))
                            && matches!(p.declarator, Declarator::Name { name: None, .. })
                    })
                    .count();
                if nvoid > 0 && (params.len() > 1 || *varargs) {
                    return Err(derr(
                        "D_DECL_PROTO_VOID",
                        params[0].line,
                        "void must be sole parameter",
                    ));
                }
                for (pi, p) in params.iter().enumerate() {
                    if nvoid == 1 {
                        break;
                    }
                    if let Some(c) = p.specs.class {
                        if c != StorageClass::Register {
                            return Err(derr(
                                "D_DECL_PARMCLASS",
                                p.line,
                                "inappropriate storage class for function or associative array parameter",
                            ));
                        }
                    }
                    let b = self.base_type(&p.specs)?;
                    let (pname, t, pkeys) = self.apply_declarator(b, &p.declarator)?;
                    if self.types.is_void(t) {
                        if let Some(n) = pname {
                            return Err(derr(
                                "D_DECL_PROTO_NAME",
                                p.line,
                                format!("void parameter may not have a name: {n}"),
                            ));
                        }
                    }
                    if pkeys.is_some() {
                        // dt_decl.c, dt_decl_prototype: a dynamic type is named "<DYN>"
                        return Err(derr(
                            "D_DECL_PROTO_TYPE",
                            p.line,
                            format!(
                                "function prototype may not use parameter of type <DYN>: {}, \
                                 parameter #{}",
                                pname.as_deref().unwrap_or("(anonymous)"),
                                pi + 1
                            ),
                        ));
                    }
                    if self.types.is_void(t) {
                        return Err(derr(
                            "D_DECL_PROTO_TYPE",
                            p.line,
                            "invalid parameter type: void",
                        ));
                    }
                }
                // libdtrace checks the prototype but keeps no function types of its own: every
                // function D declares is its one representative type, a function returning
                // int with no parameters (`dt_decl_type()`: "CTF treats all function pointers
                // identically"), named `int ()`
                let f = self.types.add(TypeKind::Function {
                    ret: self.types.int,
                    params: Vec::new(),
                    varargs: false,
                });
                self.apply_inner(f, inner, keys)
            }
            Declarator::Bitfield { inner, .. } => self.apply_inner(base, inner, keys),
        }
    }

    pub(crate) fn type_name(&mut self, tn: &TypeName) -> DResult<TypeId> {
        let b = self.base_type(&tn.specs)?;
        let (_, t, _) = self.apply_declarator(b, &tn.declarator)?;
        Ok(t)
    }

    fn sou(
        &mut self,
        kind: SouKind,
        name: Option<&str>,
        members: Option<&[MemberDecl]>,
        line: u32,
    ) -> DResult<TypeId> {
        let tag = match kind {
            SouKind::Struct => SouTag::Struct,
            SouKind::Union => SouTag::Union,
        };
        let kw = match kind {
            SouKind::Struct => "struct",
            SouKind::Union => "union",
        };
        let kernel = name.is_some_and(|n| crate::lang::kernel::kernel_scope(n).is_some());
        let name = name.map(|n| match n.rfind('`') {
            Some(i) => &n[i + 1..],
            None => n,
        });
        // a definition shadows the library's tag of the same name (a lower scope)
        let existing = name
            .filter(|n| members.is_none() || !self.types.is_library_tag(tag, n))
            .and_then(|n| self.types.tag(tag, n));
        let Some(members) = members else {
            // a reference (or forward declaration)
            if let Some(t) = existing {
                if kernel && !self.types.is_complete(t) {
                    self.kernel_tags.insert(t);
                }
                return Ok(t);
            }
            let t = self.types.add(forward_sou(kind, name));
            if kernel {
                self.kernel_tags.insert(t);
            }
            if let Some(n) = name {
                self.types.set_tag(tag, n, t);
            }
            return Ok(t);
        };
        if let Some(t) = existing {
            if self.types.is_complete(t) {
                return Err(derr(
                    "D_DECL_TYPERED",
                    line,
                    format!("type redeclared: {kw} {}", name.unwrap_or("")),
                ));
            }
        }
        let id = match existing {
            Some(t) => t,
            None => {
                let t = self.types.add(forward_sou(kind, name));
                if let Some(n) = name {
                    self.types.set_tag(tag, n, t);
                }
                t
            }
        };
        let mut ms: Vec<Member> = Vec::new();
        for md in members {
            let base = self.base_type(&md.specs)?;
            for d in &md.declarators {
                let (mname, mut ty, _) = self.apply_declarator(base, d)?;
                let mut bits = None;
                if let Declarator::Bitfield { width, .. } = d {
                    let min = if mname.is_some() { 1 } else { 0 };
                    let w =
                        match self.const_int(width)? {
                            Some(w) if w >= min => w,
                            _ => return Err(derr(
                                "D_DECL_BFCONST",
                                md.line,
                                "positive integral constant expression expected as bit-field size",
                            )),
                        };
                    if !self.types.is_integer(ty) {
                        // dt_decl.c, dt_decl_member
                        return Err(derr(
                            "D_DECL_BFTYPE",
                            md.line,
                            format!(
                                "invalid type for bit-field: {}",
                                mname.as_deref().unwrap_or("")
                            ),
                        ));
                    }
                    let tbits = self.types.size_of(ty) * 8;
                    if w as u64 > tbits {
                        return Err(derr(
                            "D_DECL_BFSIZE",
                            md.line,
                            format!(
                                "bit-field too big for type: {}",
                                mname.as_deref().unwrap_or("")
                            ),
                        ));
                    }
                    bits = Some(w as u32);
                    ty = self.types.resolve(ty);
                }
                let Some(mname) = mname else {
                    if bits.is_some() {
                        continue;
                    }
                    return Err(derr(
                        "D_DECL_MNAME",
                        md.line,
                        "member declaration requires a name",
                    ));
                };
                if mname.contains('`') {
                    return Err(derr(
                        "D_DECL_SCOPE",
                        md.line,
                        format!("D scoping operator may not be used in a member name ({mname})"),
                    ));
                }
                if !self.types.is_complete(ty)
                    || (self.types.is_sou(ty) && self.types.size_of(ty) == 0)
                {
                    return Err(derr(
                        "D_DECL_INCOMPLETE",
                        md.line,
                        format!(
                            "incomplete struct/union/enum {}: {mname}",
                            self.types.name(ty)
                        ),
                    ));
                }
                if self.types.is_void(ty) || self.types.is_function(ty) {
                    return Err(derr(
                        "D_DECL_VOIDOBJ",
                        md.line,
                        format!("cannot have void member: {mname}"),
                    ));
                }
                if ms.iter().any(|m| m.name == mname) {
                    return Err(derr(
                        "D_UNKNOWN",
                        md.line,
                        format!(
                            "failed to define member '{mname}': Duplicate member or variable name"
                        ),
                    ));
                }
                ms.push(Member {
                    name: mname,
                    ty,
                    offset_bits: 0,
                    bits,
                });
            }
        }
        let union = kind == SouKind::Union;
        let (size, align) = self.types.layout(&mut ms, union);
        *self.types.kind_mut(id) = match kind {
            SouKind::Struct => TypeKind::Struct {
                name: name.map(String::from),
                members: ms,
                size,
                align,
                complete: true,
            },
            SouKind::Union => TypeKind::Union {
                name: name.map(String::from),
                members: ms,
                size,
                align,
                complete: true,
            },
        };
        Ok(id)
    }

    fn enum_def(
        &mut self,
        name: Option<&str>,
        list: Option<&[Enumerator]>,
        line: u32,
    ) -> DResult<TypeId> {
        let name = name.map(|n| match n.rfind('`') {
            Some(i) => &n[i + 1..],
            None => n,
        });
        let existing = name.and_then(|n| self.types.tag(SouTag::Enum, n));
        let Some(list) = list else {
            if let Some(t) = existing {
                return Ok(t);
            }
            let t = self.types.add(TypeKind::Enum {
                name: name.map(String::from),
                values: vec![],
                complete: false,
            });
            if let Some(n) = name {
                self.types.set_tag(SouTag::Enum, n, t);
            }
            return Ok(t);
        };
        if let Some(t) = existing {
            if self.types.is_complete(t) {
                return Err(derr(
                    "D_DECL_TYPERED",
                    line,
                    format!("type redeclared: enum {}", name.unwrap_or("")),
                ));
            }
        }
        let id = existing.unwrap_or_else(|| {
            self.types.add(TypeKind::Enum {
                name: name.map(String::from),
                values: vec![],
                complete: false,
            })
        });
        if let Some(n) = name {
            self.types.set_tag(SouTag::Enum, n, id);
        }
        let mut values: Vec<(String, i64)> = Vec::new();
        let mut next: i64 = 0;
        for e in list {
            if e.name.contains('`') {
                return Err(derr(
                    "D_DECL_SCOPE",
                    e.line,
                    format!(
                        "D scoping operator may not be used in an enumerator name ({})",
                        e.name
                    ),
                ));
            }
            let v = match &e.value {
                Some(x) => match self.const_int(x)? {
                    Some(v) => v,
                    None => {
                        return Err(derr(
                            "D_DECL_ENCONST",
                            e.line,
                            format!(
                            "enumerator '{}' must be assigned to an integral constant expression",
                            e.name
                        ),
                        ))
                    }
                },
                None => next,
            };
            if v < i32::MIN as i64 || v > i32::MAX as i64 {
                return Err(derr(
                    "D_DECL_ENOFLOW",
                    e.line,
                    format!(
                        "enumerator '{}' value overflows INT_MAX (2147483647)",
                        e.name
                    ),
                ));
            }
            if self.enum_consts.contains_key(&e.name) && !values.iter().any(|(n, _)| *n == e.name) {
                return Err(derr(
                    "D_DECL_IDRED",
                    e.line,
                    format!("identifier redeclared: {}", e.name),
                ));
            }
            if values.iter().any(|(n, _)| *n == e.name) || self.globals.contains_key(&e.name) {
                return Err(derr(
                    "D_UNKNOWN",
                    e.line,
                    format!(
                        "failed to define enumerator '{}': Duplicate member or variable name",
                        e.name
                    ),
                ));
            }
            values.push((e.name.clone(), v));
            self.enum_consts.insert(e.name.clone(), (v, id));
            next = v + 1;
        }
        *self.types.kind_mut(id) = TypeKind::Enum {
            name: name.map(String::from),
            values,
            complete: true,
        };
        Ok(id)
    }

    pub(crate) fn declaration(&mut self, d: &Declaration) -> DResult<()> {
        let base = self.base_type(&d.specs)?;
        if d.declarators.is_empty() {
            // `struct foo { ... };` alone is fine; anything else declares nothing
            let ok = matches!(
                d.specs.base,
                Some(BaseSpec::Sou { .. }) | Some(BaseSpec::Enum { .. })
            );
            if !ok && d.specs.class != Some(StorageClass::Typedef) {
                return Err(derr("D_DECL_USELESS", d.line, "useless declaration"));
            }
            return Ok(());
        }
        for id in &d.declarators {
            let (name, ty, keys) = self.apply_declarator(base, &id.declarator)?;
            let Some(name) = name else { continue };
            let line = id.line;
            match d.specs.class {
                Some(StorageClass::Typedef) => {
                    // the library's typedefs are a lower scope the program's shadow
                    let mine = (!self.types.is_library_name(&name))
                        .then(|| self.types.lookup(&name))
                        .flatten();
                    if let Some(old) = mine {
                        if !self.types.compatible(old, ty)
                            || self.types.resolve(old) != self.types.resolve(ty)
                        {
                            return Err(derr(
                                "D_DECL_IDRED",
                                line,
                                format!("identifier redeclared: {name}"),
                            ));
                        }
                        continue;
                    }
                    self.types.add_typedef(&name, ty);
                }
                class => {
                    let scope = match class {
                        Some(StorageClass::SelfClass) => VarScope::Thread,
                        Some(StorageClass::This) => VarScope::Clause,
                        _ => VarScope::Global,
                    };
                    if name.contains('`') {
                        return Err(derr(
                            "D_DECL_SCOPE",
                            line,
                            // dt_parser.c, dt_node_decl
                            format!(
                                "D scoping operator may not be used in a declaration name ({name})"
                            ),
                        ));
                    }
                    if class == Some(StorageClass::Extern) {
                        // kernel symbols: accept the declaration
                        continue;
                    }
                    if matches!(
                        class,
                        Some(StorageClass::Auto | StorageClass::Register | StorageClass::Static)
                    ) {
                        return Err(derr(
                            "D_DECL_BADCLASS",
                            line,
                            "specified storage class not appropriate in D",
                        ));
                    }
                    if self.types.is_function(ty) {
                        // a function prototype declares nothing that can be called
                        continue;
                    }
                    if keys.is_none()
                        && matches!(self.types.rkind(ty), TypeKind::Array { len: 0, .. })
                    {
                        return Err(derr(
                            "D_DECL_ARRNULL",
                            line,
                            format!("array declaration requires array dimension or tuple signature: {name}"),
                        ));
                    }
                    if self.types.is_void(ty) {
                        return Err(derr(
                            "D_DECL_VOIDOBJ",
                            line,
                            format!("cannot have void object: {name}"),
                        ));
                    }
                    if !self.types.is_complete(ty) {
                        return Err(derr(
                            "D_DECL_INCOMPLETE",
                            line,
                            format!(
                                "incomplete struct/union/enum {}: {name}",
                                self.types.name(ty)
                            ),
                        ));
                    }
                    if scope == VarScope::Clause && keys.is_some() {
                        return Err(derr(
                            "D_DECL_LOCASSC",
                            line,
                            format!(
                                "associative arrays may not be declared as local variables: {name}"
                            ),
                        ));
                    }
                    if scope == VarScope::Global && self.builtin(&name).is_some() {
                        return Err(derr(
                            "D_DECL_IDRED",
                            line,
                            format!("built-in identifier redeclared: {name}"),
                        ));
                    }
                    let table = match scope {
                        VarScope::Global => &self.globals,
                        VarScope::Thread => &self.thread_vars,
                        VarScope::Clause => &self.clause_vars,
                    };
                    if let Some(old) = table.get(&name) {
                        let same = self.types.resolve(old.ty) == self.types.resolve(ty)
                            || self.types.compatible(old.ty, ty)
                                && self.types.name(old.ty) == self.types.name(ty);
                        if !same || old.keys.is_some() != keys.is_some() {
                            return Err(derr(
                                "D_DECL_IDRED",
                                line,
                                format!("identifier redeclared: {name}"),
                            ));
                        }
                        continue;
                    }
                    let idn = self.new_var_id();
                    let info = VarInfo {
                        ty,
                        keys,
                        scope,
                        declared: true,
                        id: idn,
                    };
                    match scope {
                        VarScope::Global => self.globals.insert(name, info),
                        VarScope::Thread => self.thread_vars.insert(name, info),
                        VarScope::Clause => self.clause_vars.insert(name, info),
                    };
                }
            }
        }
        Ok(())
    }

    pub(crate) fn inline_def(&mut self, d: &InlineDef) -> DResult<()> {
        let base = self.base_type(&d.specs)?;
        let (name, ty, keys) = self.apply_declarator(base, &d.declarator)?;
        let name = name.unwrap_or_default();
        let params: Option<Vec<(String, TypeId)>> = keys.map(|ks| {
            let names = key_names(&d.declarator);
            ks.into_iter()
                .enumerate()
                .map(|(i, t)| (names.get(i).cloned().flatten().unwrap_or_default(), t))
                .collect()
        });
        // the D library defines the variables the built-in table reserves for it (curpsinfo)
        let reserved_for_library = self
            .builtin(&name)
            .is_some_and(|b| b.origin == crate::lang::builtins::Origin::DLibrary);
        if self.soft_inlines.remove(&name) {
            self.inlines.remove(&name);
        }
        if self.inlines.contains_key(&name)
            || self.globals.contains_key(&name)
            || (self.builtin(&name).is_some() && !reserved_for_library)
        {
            return Err(derr(
                "D_DECL_IDRED",
                d.line,
                format!("identifier redeclared: {name}"),
            ));
        }
        // the value is typed now, with the inline itself not yet visible (no recursion) and its
        // parameters bound
        let value = std::sync::Arc::new(d.value.clone());
        let mut saved = Vec::new();
        for (pname, pty) in params.iter().flatten() {
            saved.push((pname.clone(), self.inlines.remove(pname)));
            self.inlines.insert(
                pname.clone(),
                InlineInfo {
                    ty: *pty,
                    value: value.clone(),
                    params: None,
                    opaque: true,
                },
            );
        }
        let v = self.expr(&d.value);
        for (pname, old) in saved {
            self.inlines.remove(&pname);
            if let Some(o) = old {
                self.inlines.insert(pname, o);
            }
        }
        let v = v?;
        if !self.types.is_void(ty) && !self.assignable(ty, &v) {
            return Err(derr(
                "D_OP_INCOMPAT",
                d.line,
                format!(
                    "inline {name} definition uses incompatible types: \"{}\" = \"{}\"",
                    self.types.name(ty),
                    self.types.name(v.ty)
                ),
            ));
        }
        self.inlines.insert(
            name,
            InlineInfo {
                ty,
                value,
                params,
                opaque: false,
            },
        );
        Ok(())
    }

    pub(crate) fn translator_def(&mut self, d: &TranslatorDef) -> DResult<()> {
        let output = self.type_name(&d.output)?;
        let input = self.type_name(&d.input)?;
        if self.types.is_sou(output) && !self.types.is_complete(output) {
            return Err(derr(
                "D_XLATE_SOU",
                d.line,
                format!("incomplete struct/union/enum {}", self.types.name(output)),
            ));
        }
        if !self.types.is_sou(output) {
            return Err(derr(
                "D_XLATE_SOU",
                d.line,
                // dt_parser.c, dt_node_xlator
                "translator output type must be a struct or union",
            ));
        }
        if self.translators.iter().any(|t| {
            self.types.resolve(t.output) == self.types.resolve(output)
                && self.types.resolve(t.input) == self.types.resolve(input)
        }) {
            return Err(derr(
                "D_XLATE_REDECL",
                d.line,
                format!(
                    "translator from {} to {} has already been declared",
                    self.types.name(input),
                    self.types.name(output)
                ),
            ));
        }
        // members are typed with the input name bound as an inline of the input type
        let saved = self.inlines.remove(&d.input_name);
        self.inlines.insert(
            d.input_name.clone(),
            InlineInfo {
                ty: input,
                value: std::sync::Arc::new(Expr::new(
                    ExprKind::Ident(d.input_name.clone()),
                    d.line,
                )),
                params: None,
                opaque: true,
            },
        );
        let mut result = Ok(());
        for (mname, e, line) in &d.members {
            let Some(m) = self.types.member(output, mname).cloned() else {
                result = Err(derr(
                    "D_XLATE_MEMB",
                    *line,
                    format!(
                        "translator member {mname} is not a member of {}",
                        self.types.name(output)
                    ),
                ));
                break;
            };
            let v = match self.expr(e) {
                Ok(v) => v,
                Err(err) => {
                    result = Err(err);
                    break;
                }
            };
            if !self.assignable(m.ty, &v) {
                result = Err(derr(
                    "D_XLATE_INCOMPAT",
                    *line,
                    format!(
                        "translator member {mname} definition uses incompatible types: \"{}\" = \"{}\"",
                        self.types.name(m.ty),
                        self.types.name(v.ty)
                    ),
                ));
                break;
            }
        }
        self.inlines.remove(&d.input_name);
        if let Some(s) = saved {
            self.inlines.insert(d.input_name.clone(), s);
        }
        result?;
        self.translators.push(Translator {
            output,
            input,
            input_name: d.input_name.clone(),
            members: d
                .members
                .iter()
                .map(|(n, e, _)| (n.clone(), e.clone()))
                .collect(),
        });
        Ok(())
    }

    pub(crate) fn provider_def(&mut self, p: &ProviderDef) -> DResult<()> {
        for pr in &p.probes {
            for a in &pr.args {
                let b = self.base_type(&a.specs)?;
                self.apply_declarator(b, &a.declarator)?;
            }
        }
        Ok(())
    }

    /// Evaluates an integer constant expression, `None` when it is not constant.
    pub(crate) fn const_int(&mut self, e: &Expr) -> DResult<Option<i64>> {
        let t = self.expr(e)?;
        Ok(t.konst)
    }
}

/// The parameter names of an inline associative array's key list.
fn key_names(d: &Declarator) -> Vec<Option<String>> {
    match d {
        Declarator::Array {
            size: ArraySize::Keys(tns),
            ..
        } => tns
            .iter()
            .map(|t| t.declarator.name().map(String::from))
            .collect(),
        Declarator::Name { .. } => Vec::new(),
        Declarator::Pointer { inner, .. }
        | Declarator::Array { inner, .. }
        | Declarator::Function { inner, .. }
        | Declarator::Bitfield { inner, .. } => key_names(inner),
    }
}

/// A struct or union known by name only, not yet defined (size 0, incomplete).
fn forward_sou(kind: SouKind, name: Option<&str>) -> TypeKind {
    let name = name.map(String::from);
    match kind {
        SouKind::Struct => TypeKind::Struct {
            name,
            members: vec![],
            size: 0,
            align: 1,
            complete: false,
        },
        SouKind::Union => TypeKind::Union {
            name,
            members: vec![],
            size: 0,
            align: 1,
            complete: false,
        },
    }
}

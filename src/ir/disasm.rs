//! `dtx -S`: prints a compiled program — its variables, aggregations and, per clause, the
//! predicate and statements as s-expressions over the lowered nodes.

use std::fmt::Write as _;

use super::*;

fn kind(k: ValKind) -> String {
    match k {
        ValKind::Int { size, signed } => format!("{}{}", if signed { "i" } else { "u" }, size * 8),
        ValKind::String => "string".into(),
        ValKind::ByRef { size } => format!("ref{size}"),
    }
}

fn scope(s: Scope) -> &'static str {
    match s {
        Scope::Global => "global",
        Scope::Thread => "self",
        Scope::Clause => "this",
    }
}

fn lvalue(p: &Program, l: &LValue) -> String {
    match l {
        LValue::Var { id, scope: s, .. } => var_name(p, *id, *s),
        LValue::Array {
            id, scope: s, keys, ..
        } => {
            let ks: Vec<String> = keys.iter().map(|k| node(p, k)).collect();
            format!("{}[{}]", var_name(p, *id, *s), ks.join(", "))
        }
        LValue::Mem { addr, kind: k } => format!("(mem {} {})", kind(*k), node(p, addr)),
        LValue::Bitfield {
            addr,
            size,
            shift,
            bits,
        } => {
            format!("(bits {size} {shift} {bits} {})", node(p, addr))
        }
        LValue::Uregs(i) => format!("uregs[{}]", node(p, i)),
        LValue::Value(v) => node(p, v),
    }
}

fn var_name(p: &Program, id: u32, s: Scope) -> String {
    let name = p.variable(id).map(|v| v.name.as_str()).unwrap_or("?");
    match s {
        Scope::Global => name.to_string(),
        _ => format!("{}->{}", scope(s), name),
    }
}

/// One node as an s-expression.
pub fn node(p: &Program, n: &Node) -> String {
    let b = |op: &str, x: &Node, y: &Node| format!("({op} {} {})", node(p, x), node(p, y));
    match n {
        Node::Const(v) => v.to_string(),
        Node::Str(s) => format!("{s:?}"),
        Node::Builtin { name, .. } => name.to_string(),
        Node::Arg(i) => format!("arg{i}"),
        Node::Args { index, kind: k } => format!("(args {} {})", kind(*k), node(p, index)),
        Node::Uregs(i) => format!("(uregs {})", node(p, i)),
        Node::Var { id, scope: s, .. } => var_name(p, *id, *s),
        Node::Array {
            id, scope: s, keys, ..
        } => {
            let ks: Vec<String> = keys.iter().map(|k| node(p, k)).collect();
            format!("{}[{}]", var_name(p, *id, *s), ks.join(", "))
        }
        Node::Load { addr, kind: k } => format!("(load {} {})", kind(*k), node(p, addr)),
        Node::Bitfield {
            addr,
            size,
            shift,
            bits,
            signed,
        } => format!(
            "(bitfield {} {size} {shift} {bits} {})",
            if *signed { "s" } else { "u" },
            node(p, addr)
        ),
        Node::Binary {
            op,
            signed,
            a,
            b: y,
        } => {
            let o = match op {
                BinOp::Add => "+",
                BinOp::Sub => "-",
                BinOp::Mul => "*",
                BinOp::Div if *signed => "sdiv",
                BinOp::Div => "udiv",
                BinOp::Mod if *signed => "srem",
                BinOp::Mod => "urem",
                BinOp::And => "&",
                BinOp::Or => "|",
                BinOp::Xor => "^",
                BinOp::Shl => "<<",
                BinOp::Shr if *signed => "sra",
                BinOp::Shr => "srl",
            };
            b(o, a, y)
        }
        Node::Compare {
            op,
            kind: k,
            a,
            b: y,
        } => {
            let o = match op {
                CmpOp::Eq => "==",
                CmpOp::Ne => "!=",
                CmpOp::Lt => "<",
                CmpOp::Le => "<=",
                CmpOp::Gt => ">",
                CmpOp::Ge => ">=",
            };
            let k = match k {
                CmpKind::Signed => "",
                CmpKind::Unsigned => "u",
                CmpKind::String => "s",
            };
            b(&format!("{k}{o}"), a, y)
        }
        Node::Neg(x) => format!("(neg {})", node(p, x)),
        Node::BitNot(x) => format!("(~ {})", node(p, x)),
        Node::Not(x) => format!("(! {})", node(p, x)),
        Node::LogAnd(x, y) => b("&&", x, y),
        Node::LogOr(x, y) => b("||", x, y),
        Node::LogXor(x, y) => b("^^", x, y),
        Node::Ternary(c, x, y) => format!("(? {} {} {})", node(p, c), node(p, x), node(p, y)),
        Node::Cast {
            value,
            size,
            signed,
        } => format!(
            "(cast {}{} {})",
            if *signed { "i" } else { "u" },
            size * 8,
            node(p, value)
        ),
        Node::Assign { target, value } => format!("(= {} {})", lvalue(p, target), node(p, value)),
        Node::IncDec {
            target,
            delta,
            post,
        } => format!(
            "({} {} {})",
            if *post { "post+=" } else { "pre+=" },
            lvalue(p, target),
            delta
        ),
        Node::Call { name, args, .. } => {
            let a: Vec<String> = args.iter().map(|x| node(p, x)).collect();
            format!("({name} {})", a.join(" ")).replace(" )", ")")
        }
        Node::AddrOf(l) => format!("(& {})", lvalue(p, l)),
        Node::Stringof(x) => format!("(stringof {})", node(p, x)),
        Node::Seq(x, y) => b(",", x, y),
        Node::Build { size, fields } => {
            let fs: Vec<String> = fields
                .iter()
                .map(|f| {
                    format!(
                        "[{} {} {}]",
                        f.offset_bits / 8,
                        kind(f.kind),
                        node(p, &f.value)
                    )
                })
                .collect();
            format!("(build {size} {})", fs.join(" "))
        }
    }
}

fn action(p: &Program, a: &Action) -> String {
    let args: Vec<String> = a.args.iter().map(|x| node(p, x)).collect();
    let agg = |id: u32| {
        format!(
            "@{}",
            p.aggregations
                .get(id as usize)
                .map(|g| g.name.trim_start_matches('@'))
                .unwrap_or("?")
        )
    };
    let head = match &a.kind {
        ActionKind::Printf(f) => format!("printf {:?}", f.source),
        ActionKind::Printa { format, aggs } => {
            let names: Vec<String> = aggs.iter().map(|i| agg(*i)).collect();
            match format {
                Some(f) => format!("printa {:?} {}", f.source, names.join(" ")),
                None => format!("printa {}", names.join(" ")),
            }
        }
        ActionKind::Stack { frames } => format!("stack {frames}"),
        ActionKind::Ustack { frames, strsize } => format!("ustack {frames} {strsize}"),
        ActionKind::Jstack { frames, strsize } => format!("jstack {frames} {strsize}"),
        ActionKind::Clear(i) => format!("clear {}", agg(*i)),
        ActionKind::Trunc(i) => format!("trunc {}", agg(*i)),
        ActionKind::Normalize(i) => format!("normalize {}", agg(*i)),
        ActionKind::Denormalize(i) => format!("denormalize {}", agg(*i)),
        ActionKind::Freopen(f) => format!("freopen {:?}", f.source),
        ActionKind::System(f) => format!("system {:?}", f.source),
        ActionKind::Aggregate { agg: id } => {
            let keys: Vec<String> = a.keys.iter().map(|k| node(p, k)).collect();
            let func = p
                .aggregations
                .get(*id as usize)
                .map(|g| format!("{:?}", g.func).to_lowercase())
                .unwrap_or_default();
            return format!(
                "{}[{}] = {func}({})",
                agg(*id),
                keys.join(", "),
                args.join(", ")
            );
        }
        other => format!("{other:?}").to_lowercase(),
    };
    if args.is_empty() {
        head
    } else {
        format!("{head} {}", args.join(" "))
    }
}

fn stmts(p: &Program, body: &[Stmt], depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    for s in body {
        match s {
            Stmt::Eval(n) => {
                let _ = writeln!(out, "{pad}{}", node(p, n));
            }
            Stmt::Action(a) => {
                let _ = writeln!(out, "{pad}{}", action(p, a));
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let _ = writeln!(out, "{pad}if {}", node(p, cond));
                stmts(p, then, depth + 1, out);
                if !otherwise.is_empty() {
                    let _ = writeln!(out, "{pad}else");
                    stmts(p, otherwise, depth + 1, out);
                }
            }
        }
    }
}

/// The whole program as text.
pub fn program(p: &Program) -> String {
    let mut out = String::new();
    for (i, v) in p.variables.iter().enumerate() {
        if v.name.is_empty() {
            continue;
        }
        let keys = match &v.keys {
            Some(k) => format!(
                "[{}]",
                k.iter().map(|x| kind(*x)).collect::<Vec<_>>().join(", ")
            ),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "var {i} {} {}{keys} {}",
            scope(v.scope),
            v.name,
            kind(v.kind)
        );
    }
    for (i, a) in p.aggregations.iter().enumerate() {
        let _ = writeln!(out, "agg {i} {} {:?}", a.name, a.func);
    }
    for (i, c) in p.clauses.iter().enumerate() {
        let probes: Vec<String> = c.probes.iter().map(|d| d.to_string()).collect();
        let _ = writeln!(
            out,
            "\nclause {} (line {}): {}",
            i + 1,
            c.line,
            probes.join(", ")
        );
        if let Some(pr) = &c.predicate {
            let _ = writeln!(out, "  predicate {}", node(p, pr));
        }
        stmts(p, &c.body, 1, &mut out);
    }
    out
}

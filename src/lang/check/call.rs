//! Calls: resolving the called name among D's subroutines, actions and aggregating functions, and
//! checking arguments against the built-in prototypes (`D_PROTO_LEN`, `D_PROTO_ARG`).

use super::expr::Typed;
use super::Checker;
use crate::lang::ast::*;
use crate::lang::builtins::{self, Builtin, BuiltinKind};
use crate::lang::diag::{derr, DResult};
use crate::lang::types::TypeId;

impl Checker<'_> {
    /// Resolves the function named by a call expression.
    pub(crate) fn callee(&self, func: &Expr, line: u32) -> DResult<&'static Builtin> {
        let name = match &func.kind {
            ExprKind::Ident(n) => n.as_str(),
            _ => {
                return Err(derr(
                    "D_FUNC_IDENT",
                    line,
                    "function designator is not of function type",
                ))
            }
        };
        match self.builtin(name) {
            Some(b) if b.is_callable() => Ok(b),
            Some(_) => Err(derr(
                "D_FUNC_IDENT",
                line,
                format!("{name} is not a function"),
            )),
            None => {
                if self.globals.contains_key(name) || self.inlines.contains_key(name) {
                    return Err(derr(
                        "D_FUNC_IDENT",
                        line,
                        format!("{name} is not a function"),
                    ));
                }
                if let Some(why) = crate::lang::builtins::microsoft_only(name) {
                    return Err(derr("D_FUNC_UNDEF", line, why));
                }
                Err(derr(
                    "D_FUNC_UNDEF",
                    line,
                    format!("undefined function name: {name}"),
                ))
            }
        }
    }

    /// Whether an argument fits a prototype parameter type (`dt_node_is_argcompat`).
    pub(crate) fn arg_compatible(&self, param: TypeId, arg: &Typed) -> bool {
        self.arg_compat(param, arg)
    }

    /// Checks a call's argument count and types against the built-in's prototype.
    pub(crate) fn check_proto(
        &mut self,
        b: &Builtin,
        args: &[Typed],
        line: u32,
    ) -> DResult<TypeId> {
        let proto = match b.parsed_proto() {
            Ok(p) => p,
            Err(_) => return Ok(self.types.int64),
        };
        self.check_proto_args(b, &proto, args, line)?;
        Ok(self.type_from_text(&proto.ret))
    }

    /// Checks the argument count and each argument's type against a parsed prototype
    /// (`D_PROTO_LEN`, `D_PROTO_ARG`); `@` parameters take anything.
    pub(crate) fn check_proto_args(
        &mut self,
        b: &Builtin,
        proto: &builtins::Proto,
        args: &[Typed],
        line: u32,
    ) -> DResult<()> {
        if let Err(msg) = builtins::check_call_arity(b.name, proto, args.len()) {
            return Err(derr("D_PROTO_LEN", line, msg));
        }
        self.check_proto_arg_types(b, proto, args, line)
    }

    /// Checks each argument's type against its parameter in a parsed prototype (`D_PROTO_ARG`);
    /// `@` parameters take anything, and arguments past the parameters are not looked at.
    pub(crate) fn check_proto_arg_types(
        &mut self,
        b: &Builtin,
        proto: &builtins::Proto,
        args: &[Typed],
        line: u32,
    ) -> DResult<()> {
        for (i, (p, a)) in proto.params.iter().zip(args).enumerate() {
            if p.ty == "@" {
                continue;
            }
            let pt = self.type_from_text(&p.ty);
            if !self.arg_compatible(pt, a) {
                return Err(derr(
                    "D_PROTO_ARG",
                    line,
                    builtins::proto_arg_message(
                        "",
                        b.name,
                        "( )",
                        false,
                        i + 1,
                        &self.types.name(pt),
                        &self.types.name(a.ty),
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A call in an expression. Actions and aggregating functions type as `void` actions here;
    /// their statement-level rules are in `actions.rs`.
    pub(crate) fn call(&mut self, func: &Expr, args: &[Expr], line: u32) -> DResult<Typed> {
        let b = self.callee(func, line)?;
        // dt_cg.c, dt_cg_node: an aggregating function outside an aggregation's assignment
        if b.kind == BuiltinKind::AggFunc {
            return Err(derr(
                "D_CG_EXPR",
                line,
                format!(
                    "aggregating function {}( ) may not be called from a D expression \
                     (D program context required)",
                    b.name
                ),
            ));
        }
        let mut typed = Vec::with_capacity(args.len());
        for a in args {
            typed.push(self.expr(a)?);
        }
        if b.kind == BuiltinKind::Action {
            self.check_proto(b, &typed, line)?;
            return Ok(Typed {
                action: true,
                ..Typed::rvalue(self.types.void)
            });
        }
        let ret = self.check_proto(b, &typed, line)?;
        Ok(Typed::rvalue(ret))
    }
}

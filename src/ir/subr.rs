//! The D subroutines a program can call, as the compiler resolves them: [`Subr`] is what a
//! [`super::Node::Call`] carries, so the runtime dispatches on a small integer rather than on
//! the subroutine's name, and passes over the program (which stacks it reads, which calls copy
//! memory) match on the enum.

/// One D subroutine, or a function called in an expression that records a value of its own
/// kind as an aggregation key (`stack()`, `sym()`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subr {
    Strlen,
    Strjoin,
    Substr,
    Index,
    Rindex,
    Strstr,
    Strchr,
    Strrchr,
    Strtok,
    Tolower,
    Toupper,
    Basename,
    Dirname,
    Cleanpath,
    Lltostr,
    Strtoll,
    Htons,
    Ntohs,
    Htonl,
    Ntohl,
    Htonll,
    Ntohll,
    InetNtoa,
    InetNtoa6,
    InetNtop,
    Json,
    Rand,
    Speculation,
    Alloca,
    Bcopy,
    Copyin,
    Copyinto,
    Copyinstr,
    Copyout,
    Copyoutstr,
    Progenyof,
    Getmajor,
    Getminor,
    Wstrlen,
    Wstringof,
    /// dtx: the firing event's decoded field by name, as an integer.
    Etwfield,
    /// dtx: the firing event's decoded field by name, as a string.
    EtwfieldStr,
    DdiPathname,
    /// illumos kernel objects that do not exist elsewhere: each reads as 0.
    MutexOwned,
    MutexOwner,
    MutexTypeAdaptive,
    MutexTypeSpin,
    RwReadHeld,
    RwWriteHeld,
    RwIswriter,
    Msgsize,
    Msgdsize,
    Getf,
    // functions that make an aggregation key of their own kind
    Stack,
    Ustack,
    Jstack,
    Sym,
    Func,
    Mod,
    Usym,
    Ufunc,
    Umod,
    Uaddr,
    /// A builtin the runtime does not run as a subroutine: calling it faults (ILLOP).
    Other,
}

/// Every subroutine by its D name (`Other` has none).
const NAMES: &[(&str, Subr)] = &[
    ("strlen", Subr::Strlen),
    ("strjoin", Subr::Strjoin),
    ("substr", Subr::Substr),
    ("index", Subr::Index),
    ("rindex", Subr::Rindex),
    ("strstr", Subr::Strstr),
    ("strchr", Subr::Strchr),
    ("strrchr", Subr::Strrchr),
    ("strtok", Subr::Strtok),
    ("tolower", Subr::Tolower),
    ("toupper", Subr::Toupper),
    ("basename", Subr::Basename),
    ("dirname", Subr::Dirname),
    ("cleanpath", Subr::Cleanpath),
    ("lltostr", Subr::Lltostr),
    ("strtoll", Subr::Strtoll),
    ("htons", Subr::Htons),
    ("ntohs", Subr::Ntohs),
    ("htonl", Subr::Htonl),
    ("ntohl", Subr::Ntohl),
    ("htonll", Subr::Htonll),
    ("ntohll", Subr::Ntohll),
    ("inet_ntoa", Subr::InetNtoa),
    ("inet_ntoa6", Subr::InetNtoa6),
    ("inet_ntop", Subr::InetNtop),
    ("json", Subr::Json),
    ("rand", Subr::Rand),
    ("speculation", Subr::Speculation),
    ("alloca", Subr::Alloca),
    ("bcopy", Subr::Bcopy),
    ("copyin", Subr::Copyin),
    ("copyinto", Subr::Copyinto),
    ("copyinstr", Subr::Copyinstr),
    ("copyout", Subr::Copyout),
    ("copyoutstr", Subr::Copyoutstr),
    ("progenyof", Subr::Progenyof),
    ("getmajor", Subr::Getmajor),
    ("getminor", Subr::Getminor),
    ("wstrlen", Subr::Wstrlen),
    ("wstringof", Subr::Wstringof),
    ("etwfield", Subr::Etwfield),
    ("etwfield_str", Subr::EtwfieldStr),
    ("ddi_pathname", Subr::DdiPathname),
    ("mutex_owned", Subr::MutexOwned),
    ("mutex_owner", Subr::MutexOwner),
    ("mutex_type_adaptive", Subr::MutexTypeAdaptive),
    ("mutex_type_spin", Subr::MutexTypeSpin),
    ("rw_read_held", Subr::RwReadHeld),
    ("rw_write_held", Subr::RwWriteHeld),
    ("rw_iswriter", Subr::RwIswriter),
    ("msgsize", Subr::Msgsize),
    ("msgdsize", Subr::Msgdsize),
    ("getf", Subr::Getf),
    ("stack", Subr::Stack),
    ("ustack", Subr::Ustack),
    ("jstack", Subr::Jstack),
    ("sym", Subr::Sym),
    ("func", Subr::Func),
    ("mod", Subr::Mod),
    ("usym", Subr::Usym),
    ("ufunc", Subr::Ufunc),
    ("umod", Subr::Umod),
    ("uaddr", Subr::Uaddr),
];

impl Subr {
    /// The subroutine called `name`; [`Subr::Other`] for a name the runtime does not run.
    pub fn from_name(name: &str) -> Subr {
        NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(Subr::Other, |&(_, s)| s)
    }

    /// Its D name (`None` for [`Subr::Other`]).
    pub fn name(self) -> Option<&'static str> {
        NAMES.iter().find(|(_, s)| *s == self).map(|&(n, _)| n)
    }

    /// Whether it yields a D string (so its bytes, not its address, are what a key or a
    /// comparison uses).
    pub fn returns_string(self) -> bool {
        use Subr::*;
        matches!(
            self,
            Basename
                | Cleanpath
                | Copyinstr
                | DdiPathname
                | Dirname
                | InetNtoa
                | InetNtoa6
                | InetNtop
                | Json
                | Lltostr
                | Strchr
                | Strjoin
                | Strrchr
                | Strstr
                | Strtok
                | Substr
                | Tolower
                | Toupper
                | Wstringof
                | EtwfieldStr
        )
    }

    /// Whether it makes an aggregation key component of its own kind (a stack, a symbol)
    /// rather than an integer.
    pub fn is_key(self) -> bool {
        use Subr::*;
        matches!(
            self,
            Stack | Ustack | Jstack | Sym | Func | Mod | Usym | Ufunc | Umod | Uaddr
        )
    }

    /// Whether it reads the traced process's memory (`copyin()` and its kin).
    pub fn copies_in(self) -> bool {
        matches!(self, Subr::Copyin | Subr::Copyinstr | Subr::Copyinto)
    }

    /// Whether it copies to or from the traced process's memory (`copyin()`, `copyout()` and
    /// their kin).
    pub fn copies(self) -> bool {
        self.copies_in() || matches!(self, Subr::Copyout | Subr::Copyoutstr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &(n, s) in NAMES {
            assert_eq!(Subr::from_name(n), s, "{n}");
            assert_eq!(s.name(), Some(n));
        }
        assert_eq!(Subr::from_name("printf"), Subr::Other);
        assert_eq!(Subr::Other.name(), None);
    }

    #[test]
    fn string_returning() {
        assert!(Subr::Substr.returns_string());
        assert!(Subr::Wstringof.returns_string());
        assert!(Subr::Json.returns_string());
        assert!(!Subr::Strlen.returns_string());
        assert!(!Subr::Strtoll.returns_string());
        assert!(!Subr::Index.returns_string());
    }

    #[test]
    fn key_makers() {
        assert!(Subr::Ustack.is_key());
        assert!(Subr::Uaddr.is_key());
        assert!(!Subr::Strlen.is_key());
        assert!(!Subr::Other.is_key());
    }
}

//! Names that follow time: which image held an address of a process id when a stack was
//! sampled.
//!
//! Each process id counts *epochs* of its address space. The count moves only when an image
//! is loaded over addresses that another image of the pid held before (a DLL unloaded and
//! another loaded at its base, a pid reused by a process whose images lie where the old one's
//! did; pid 0: a driver unloaded and another loaded in its place). Every image knows the epoch
//! from which it names its range ([`Held::since`]: 0 when it is the first image recorded
//! there) and, once a later image took its place, the epoch from which that one does
//! ([`Held::until`]). A recorded stack carries the epoch of the images that named its frames
//! when it was sampled ([`super::SystemState::stack_epoch`]), and the names built at END (or
//! at any time after) name its frames at that epoch ([`holder_at`]). The epoch a stack
//! carries is the first from which all of its frames were named by the images that named them
//! when it was sampled: the same stack under the same images is the same key whenever it was
//! sampled, and two keys that differ only by epoch name some frame differently.

use super::Image;
use crate::fasthash::FastMap;

/// Epochs a pid counts at most: past it, an image loaded over another's addresses names the
/// samples taken under the other too (as every image did before names followed time), and the
/// pid's history stops growing.
pub const MAX_EPOCHS: u32 = 1024;

/// The epochs in which an image named its range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// The epoch from which it names its range (0: the first image recorded there, which also
    /// names what was sampled there before it was loaded).
    pub since: u32,
    /// The epoch from which a later image at overlapping addresses names them; `None` while
    /// none has been loaded (an image unloaded and not replaced still names its addresses).
    pub until: Option<u32>,
}

impl Held {
    fn holds_at(&self, epoch: u32) -> bool {
        self.since <= epoch && self.until.is_none_or(|u| epoch < u)
    }
}

/// Of the images that held one address (each with its [`Held`]), the one that names it at
/// `epoch`, and the first epoch from which it does so without a break up to `epoch`.
///
/// The image that held the address at that epoch names it. An address no image held at that
/// epoch (a partial overlap: the image there was replaced by one covering only part of it) is
/// named by the image that held it last before, else by the first that held it after. The
/// epoch returned names the address the same way as `epoch` does, and two epochs for which
/// different images are returned never share it.
pub fn holder_at<T: Copy>(
    covering: impl IntoIterator<Item = (T, Held)>,
    epoch: u32,
) -> Option<(T, u32)> {
    // (image, until, since) of the last to hold it before; (image, since) of the next
    let mut before: Option<(T, u32, u32)> = None;
    let mut after: Option<(T, u32)> = None;
    for (t, h) in covering {
        if h.holds_at(epoch) {
            return Some((t, h.since));
        }
        match h.until {
            Some(until) if until <= epoch => {
                if before.is_none_or(|(_, u, s)| (until, h.since) > (u, s)) {
                    before = Some((t, until, h.since));
                }
            }
            _ => {
                if after.is_none_or(|(_, s)| h.since < s) {
                    after = Some((t, h.since));
                }
            }
        }
    }
    before
        .map(|(t, u, _)| (t, u))
        .or(after.map(|(t, _)| (t, 0)))
}

/// Whether two records describe the same image mapped at one place (a rundown record of an
/// image loaded before, a DLL loaded and freed again): the same base and size, and the same
/// file: the same path, or (records may spell one path in more than one way: a rundown at the
/// end of a trace may name a file otherwise than its Load did) the same base name with link
/// time stamps that do not differ.
pub fn same_image(a: &Image, b: &Image) -> bool {
    fn base_name(i: &Image) -> &str {
        i.file_name.rsplit(['\\', '/']).next().unwrap_or("")
    }
    a.base == b.base
        && a.size == b.size
        && (a.file_name == b.file_name
            || (base_name(a).eq_ignore_ascii_case(base_name(b))
                && (a.time_date_stamp == b.time_date_stamp
                    || a.time_date_stamp == 0
                    || b.time_date_stamp == 0)))
}

/// An image that took part in a replacement (held since an epoch above 0, or replaced): the
/// addresses whose epoch a stack's frames can change.
#[derive(Clone, Copy, Debug)]
struct Span {
    base: u64,
    end: u64,
    held: Held,
}

/// One pid's epochs: the current one, and the images that took part in replacements.
#[derive(Clone, Debug, Default)]
pub(super) struct PidEpochs {
    now: u32,
    spans: Vec<Span>,
}

impl PidEpochs {
    /// The epoch a frame at `addr` sampled now carries.
    fn epoch_of(&self, addr: u64) -> u32 {
        let covering = (self.spans.iter())
            .filter(|s| s.base <= addr && addr < s.end)
            .map(|s| ((), s.held));
        holder_at(covering, self.now).map_or(0, |(_, from)| from)
    }
}

/// The epochs of every pid whose address space saw a replacement.
#[derive(Clone, Debug, Default)]
pub(super) struct Epochs(FastMap<u32, PidEpochs>);

impl Epochs {
    /// The epoch `frames` (innermost first, a zero ends them) of pid `pid`, sampled now, carry.
    #[inline]
    pub(super) fn stack_epoch(&self, pid: u32, frames: &[u64]) -> u32 {
        if self.0.is_empty() {
            return 0;
        }
        let Some(p) = self.0.get(&pid) else {
            return 0;
        };
        (frames.iter())
            .take_while(|&&f| f != 0)
            .map(|&f| p.epoch_of(f))
            .max()
            .unwrap_or(0)
    }

    /// The current epoch of `pid` (0 for a pid whose images never replaced one another).
    pub(super) fn now(&self, pid: u32) -> u32 {
        self.0.get(&pid).map_or(0, |p| p.now)
    }

    /// Gives `img`, being loaded into pid `pid`, its [`Held`], where `earlier` are the pid's
    /// images recorded before (mapped or unloaded, of its processes that ended too): an image
    /// loaded over the addresses of another that still names them starts a new epoch, in
    /// which that one stops naming them; the same image mapped again at its place goes on
    /// from where it was.
    pub(super) fn enter<'a>(
        &mut self,
        pid: u32,
        img: &mut Image,
        earlier: impl Iterator<Item = &'a mut Image>,
    ) {
        img.held = Held::default();
        if img.size == 0 {
            return;
        }
        let end = img.base.saturating_add(img.size);
        let mut open: Vec<&'a mut Image> = Vec::new();
        let (mut differs, mut touched, mut same_since) = (false, false, None::<u32>);
        for e in earlier {
            if e.size == 0 || !(e.base < end && img.base < e.base.saturating_add(e.size)) {
                continue;
            }
            touched = true;
            if e.held.until.is_some() {
                continue;
            }
            if same_image(e, img) {
                same_since = Some(same_since.map_or(e.held.since, |s| s.min(e.held.since)));
            } else {
                differs = true;
            }
            open.push(e);
        }
        if differs {
            let p = self.0.entry(pid).or_default();
            if p.now < MAX_EPOCHS {
                p.now += 1;
            }
            let new = p.now;
            for e in open {
                let (base, end, since) = (e.base, e.base.saturating_add(e.size), e.held.since);
                e.held.until = Some(new);
                match (p.spans.iter_mut())
                    .find(|s| (s.base, s.end, s.held) == (base, end, Held { since, until: None }))
                {
                    Some(s) => s.held.until = Some(new),
                    None => p.spans.push(Span {
                        base,
                        end,
                        held: e.held,
                    }),
                }
            }
            // a replaced image that never named anything (past MAX_EPOCHS) is forgotten
            p.spans.retain(|s| s.held.until != Some(s.held.since));
            img.held.since = new;
        } else if let Some(since) = same_since {
            img.held.since = since;
        } else if touched {
            // over addresses whose images were all replaced already (part of one)
            img.held.since = self.now(pid);
        }
        if img.held.since > 0 {
            let p = self.0.entry(pid).or_default();
            p.spans.push(Span {
                base: img.base,
                end,
                held: img.held,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(since: u32, until: Option<u32>) -> Held {
        Held { since, until }
    }

    #[test]
    fn the_image_of_the_epoch_names_an_address() {
        // a.dll (epochs 0..2), b.dll (2..5), c.dll (5..)
        let imgs = [
            ("a", held(0, Some(2))),
            ("b", held(2, Some(5))),
            ("c", held(5, None)),
        ];
        for (epoch, want) in [
            (0, ("a", 0)),
            (1, ("a", 0)),
            (2, ("b", 2)),
            (4, ("b", 2)),
            (5, ("c", 5)),
            (u32::MAX, ("c", 5)),
        ] {
            assert_eq!(holder_at(imgs, epoch), Some(want), "epoch {epoch}");
        }
        // nothing held it at epochs 3..6: the one before names it (from when it stopped),
        // before any: the first after (from the start)
        let gaps = [("x", held(1, Some(3))), ("y", held(6, None))];
        assert_eq!(holder_at(gaps, 0), Some(("x", 0)));
        assert_eq!(holder_at(gaps, 4), Some(("x", 3)));
        assert_eq!(holder_at(gaps, 6), Some(("y", 6)));
        assert_eq!(holder_at(std::iter::empty::<((), Held)>(), 3), None);
    }
}

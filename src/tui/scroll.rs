//! Scrolling arithmetic shared by the state (a mouse click picks a row) and the panes that
//! draw lists: which row is at the top of a view.

/// The first row to show so that `selected` is visible in `height` rows.
pub fn first_visible(selected: usize, height: usize) -> usize {
    if height == 0 {
        return selected;
    }
    // the selection sits in the view's lower part when scrolling down
    selected.saturating_sub(height - 1)
}

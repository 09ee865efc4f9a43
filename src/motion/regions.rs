//! Regions: changed cells that touch, grouped, and their boxes in frame pixels.
//!
//! Owns: the connected components of a grid's changed cells (8-connected: sides and corners) and
//! [`Region`], one component's box and size. Must not: decide what counts as motion (the detector
//! applies the minimum area) or allocate per frame once its buffers are warm.

use super::luma::CellGrid;

/// Changed cells that touch: their bounding box in frame pixels and how many cells they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Region {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
    /// Changed cells in it.
    pub cells: u32,
}

/// Finds the components of changed cells; keeps its buffers between frames.
#[derive(Debug, Default)]
pub(super) struct Components {
    /// Per cell: visited already.
    seen: Vec<bool>,
    stack: Vec<u32>,
}

impl Components {
    /// Every component of the cells `changed` marks (one per cell of `grid`, row by row), handed to
    /// `found` in the order of their first cell.
    pub(super) fn find(&mut self, grid: CellGrid, changed: &[bool], mut found: impl FnMut(Region)) {
        let (cols, rows) = (grid.cols as i64, grid.rows as i64);
        self.seen.clear();
        self.seen.resize(changed.len(), false);
        for start in 0..changed.len() {
            if !changed[start] || self.seen[start] {
                continue;
            }
            self.seen[start] = true;
            self.stack.clear();
            self.stack.push(start as u32);
            let (mut min_col, mut min_row, mut max_col, mut max_row) = (i64::MAX, i64::MAX, 0, 0);
            let mut cells = 0u32;
            while let Some(index) = self.stack.pop() {
                let (col, row) = (index as i64 % cols, index as i64 / cols);
                (min_col, min_row, max_col, max_row) =
                    (min_col.min(col), min_row.min(row), max_col.max(col), max_row.max(row));
                cells += 1;
                for (dc, dr) in [(-1, -1), (0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1), (1, 1)] {
                    let (c, r) = (col + dc, row + dr);
                    if c < 0 || r < 0 || c >= cols || r >= rows {
                        continue;
                    }
                    let neighbour = (r * cols + c) as usize;
                    if changed[neighbour] && !self.seen[neighbour] {
                        self.seen[neighbour] = true;
                        self.stack.push(neighbour as u32);
                    }
                }
            }
            let cell = grid.cell;
            found(Region {
                x: min_col as u32 * cell,
                y: min_row as u32 * cell,
                width: (max_col - min_col + 1) as u32 * cell,
                height: (max_row - min_row + 1) as u32 * cell,
                cells,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions(grid: CellGrid, picture: &str) -> Vec<Region> {
        let changed: Vec<bool> = picture.chars().filter(|c| !c.is_whitespace()).map(|c| c == '#').collect();
        assert_eq!(changed.len(), grid.len());
        let mut found = Vec::new();
        Components::default().find(grid, &changed, |region| found.push(region));
        found
    }

    #[test]
    fn cells_touching_by_a_side_or_a_corner_are_one_region() {
        // A 6x4 grid of 1-pixel cells.
        let grid = CellGrid::new(6, 4);
        let found = regions(
            grid,
            "##....
             ..#..#
             .....#
             #.....",
        );
        assert_eq!(
            found,
            vec![
                Region { x: 0, y: 0, width: 3, height: 2, cells: 3 },
                Region { x: 5, y: 1, width: 1, height: 2, cells: 2 },
                Region { x: 0, y: 3, width: 1, height: 1, cells: 1 },
            ]
        );
    }

    #[test]
    fn boxes_are_in_frame_pixels() {
        // 1080p: 12-pixel cells; cells (2, 1) and (3, 1).
        let grid = CellGrid::new(1920, 1080);
        let mut changed = vec![false; grid.len()];
        changed[160 + 2] = true;
        changed[160 + 3] = true;
        let mut found = Vec::new();
        Components::default().find(grid, &changed, |region| found.push(region));
        assert_eq!(found, vec![Region { x: 24, y: 12, width: 24, height: 12, cells: 2 }]);
    }
}

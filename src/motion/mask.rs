//! Masks: the parts of the frame whose changes are not motion (trees, a timestamp overlay, a
//! road the user does not care about), as cells of the grid.
//!
//! Owns: [`MaskRaster`], the cells each of a camera's mask polygons covers. A cell is masked when
//! its centre lies inside (or on the edge of) a mask polygon; polygons are in frame fractions like
//! zones, so a mask stays where it was drawn at any resolution. Must not: parse polygons
//! (`crate::config::scene` does, with zones) or judge motion.

use super::luma::CellGrid;
use crate::track::zones::Polygon;

/// Most masks a camera has (from the config or saved from the page).
pub const MAX_MASKS: usize = 64;

/// Which cells of a grid are masked; rebuilt when the grid or the masks change.
#[derive(Debug, Default)]
pub(super) struct MaskRaster {
    grid: Option<CellGrid>,
    masked: Vec<bool>,
    /// Cells not masked.
    open: usize,
}

impl MaskRaster {
    /// The raster of `masks` on `grid`, rebuilt only when `grid` differs from the last one's.
    pub(super) fn for_grid(&mut self, grid: CellGrid, masks: &[Polygon]) -> &MaskRaster {
        if self.grid != Some(grid) {
            self.rebuild(grid, masks);
        }
        self
    }

    /// Forgets the raster (the masks changed): the next grid rebuilds it.
    pub(super) fn invalidate(&mut self) {
        self.grid = None;
    }

    fn rebuild(&mut self, grid: CellGrid, masks: &[Polygon]) {
        self.grid = Some(grid);
        self.masked.clear();
        let (width, height) = (grid.frame_width as f64, grid.frame_height as f64);
        for row in 0..grid.rows {
            for col in 0..grid.cols {
                let (x, y) = grid.cell_origin(col, row);
                let half = grid.cell as f64 / 2.0;
                let centre = [(x as f64 + half) / width, (y as f64 + half) / height];
                self.masked.push(masks.iter().any(|mask| mask.contains(centre)));
            }
        }
        self.open = self.masked.iter().filter(|masked| !**masked).count();
    }

    /// Whether cell `index` (row by row) is masked.
    pub(super) fn is_masked(&self, index: usize) -> bool {
        self.masked.get(index).copied().unwrap_or(false)
    }

    /// Cells not masked.
    pub(super) fn open_cells(&self) -> usize {
        self.open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_is_masked_when_its_centre_is_inside_a_polygon() {
        // 1080p: 160 x 90 cells of 12 px. The left half of the frame is masked.
        let grid = CellGrid::new(1920, 1080);
        let left = Polygon::new(&[[0.0, 0.0], [0.5, 0.0], [0.5, 1.0], [0.0, 1.0]]).expect("polygon");
        let mut raster = MaskRaster::default();
        let raster = raster.for_grid(grid, &[left]);
        assert!(raster.is_masked(0) && raster.is_masked(79));
        assert!(!raster.is_masked(80) && !raster.is_masked(159));
        assert_eq!(raster.open_cells(), 80 * 90);
    }

    #[test]
    fn without_masks_every_cell_is_open() {
        let grid = CellGrid::new(640, 480);
        let mut raster = MaskRaster::default();
        assert_eq!(raster.for_grid(grid, &[]).open_cells(), grid.len());
    }
}

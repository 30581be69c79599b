-- The storefront's listing (GET /api/v1/sales) pages through the sales a
-- buyer can see by their opening, newest or soonest first. listed_starts_at
-- is a sale's opening while it is not retired (NULL once finished_at is
-- set), and sales_listing orders those sales by it, then by id: a page is
-- one range of the index from the previous page's last sale, whatever the
-- number of sales held before. The opening is the index's first part on
-- purpose: under an index led by finished_at the optimizer reads the
-- retired-or-not prefix from its start and filters the opening, every
-- page before the current one included. The column is virtual: only the
-- index stores it.
ALTER TABLE sales
  ADD COLUMN IF NOT EXISTS listed_starts_at DATETIME(3) GENERATED ALWAYS AS (IF(finished_at IS NULL, starts_at, NULL)) VIRTUAL,
  ADD INDEX IF NOT EXISTS sales_listing (listed_starts_at, id);

-- The storefront's listing (GET /api/v1/sales) pages through the sales a
-- buyer can see by their opening, newest or soonest first: the sales not
-- yet retired (finished_at IS NULL), in (starts_at, id) order, so each
-- page is one range of this index from the previous page's last sale,
-- whatever the number of sales held before.
ALTER TABLE sales ADD INDEX IF NOT EXISTS sales_listing (finished_at, starts_at, id);

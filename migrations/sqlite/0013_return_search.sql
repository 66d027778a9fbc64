-- A return (return.register) is found by its order's id: journal.Derive now puts
-- the payload's order_id in the search text, and the returns already registered
-- take it here.
UPDATE operations SET
    search_text = coalesce(ordersync_derive('search_text', key, source, external_id, payload, result), '')
WHERE kind = 'return.register';

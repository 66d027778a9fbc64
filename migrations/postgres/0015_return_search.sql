-- A return (return.register) is found by its order's id: the broad search also
-- looks in the payload's order_id, which only a return's payload has. The column
-- is generated from the function, so the returns already registered are written
-- again to take the new text; no other row changes.
CREATE OR REPLACE FUNCTION ordersync_search_text(k text, src text, ext text, p jsonb, r jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lower(k || ' ' || src || ':' || ext
        || ' ' || ordersync_scalar(p -> 'number')
        || ' ' || ordersync_scalar(p -> 'marketplace_id')
        || ' ' || ordersync_scalar(p -> 'fetch' -> 'id')
        || ' ' || ordersync_scalar(p -> 'customer' -> 'name')
        || ' ' || regexp_replace(ordersync_scalar(p -> 'customer' -> 'phone'), '[^0-9]', '', 'g')
        || ' ' || ordersync_scalar(p -> 'order_id')
        || CASE WHEN r IS NOT NULL THEN ' ' || ordersync_scalar(r -> 'number') || ' ' || ordersync_scalar(r -> 'ref') ELSE '' END)
$$;

UPDATE operations SET payload = payload WHERE kind = 'return.register';

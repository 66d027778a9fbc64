-- The accountant's list: the order's own date and total, a broad search, and what
-- 1C held of each order at the latest reconciliation that covered it.
--
--   order_created_at  the marketplace's own date of the order (the payload's
--                     created_at), NULL when the payload names none; the list's
--                     period is coalesce(order_created_at, created_at)
--   order_total       the order's total (the payload's total, or the sum of its
--                     lines), NULL when it names none; currency its currency
--   search_text       what the broad search (journal.Filter.Search) looks in:
--                     key, 1C's external id, the marketplace's number and ids,
--                     the customer's name and phone digits, 1C's number and ref;
--                     lower-cased
--   onec_seen         what the latest reconciliation saw of the order in 1C
--                     (journal.OneCSeen as JSON), NULL when none has
--
-- The first four are generated columns: PostgreSQL computes them from the payload
-- and the result whenever a row is written, by the functions below, which are
-- journal.Derive's rule in SQL (the conformance tests hold the two to one answer).
-- Adding them computes them for the rows already stored. A value that does not read
-- (a date that is no date, an amount that is no number) is NULL, as in Go: a
-- registration never fails for it.

-- scalar: a JSON string's text or a number's literal, '' for anything else.
CREATE FUNCTION ordersync_scalar(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(v) IN ('string', 'number') THEN v #>> '{}' ELSE '' END
$$;

-- The payload's created_at: RFC 3339 with a zone, to the microsecond (further digits
-- are cut, as Go truncates them).
CREATE FUNCTION ordersync_order_created_at(p jsonb) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    s text := ordersync_scalar(p -> 'created_at');
BEGIN
    IF jsonb_typeof(p -> 'created_at') = 'string'
        AND s ~ '^\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)$' THEN
        BEGIN
            -- The zone is in the text: the cast does not depend on TimeZone.
            RETURN regexp_replace(s, '(\.\d{6})\d+', '\1')::timestamptz;
        EXCEPTION WHEN OTHERS THEN
            RETURN NULL;
        END;
    END IF;
    RETURN NULL;
END
$$;

-- The order's total: the payload's total, or the sum of its lines' quantity times
-- price; NULL when it names none, or when an amount is no number.
CREATE FUNCTION ordersync_order_total(p jsonb) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    amount CONSTANT text := '^-?\d+(\.\d+)?$';
    total numeric;
BEGIN
    IF jsonb_typeof(p) IS DISTINCT FROM 'object' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p -> 'lines') = 'array' AND EXISTS (SELECT FROM jsonb_array_elements(p -> 'lines') l
            WHERE jsonb_typeof(l) IS DISTINCT FROM 'object'
                OR (l ? 'quantity' AND jsonb_typeof(l -> 'quantity') <> 'null' AND ordersync_scalar(l -> 'quantity') !~ amount)
                OR (l ? 'price' AND jsonb_typeof(l -> 'price') <> 'null' AND ordersync_scalar(l -> 'price') !~ amount)) THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p -> 'total') NOT IN ('null') THEN
        IF ordersync_scalar(p -> 'total') !~ amount THEN
            RETURN NULL;
        END IF;
        RETURN ordersync_scalar(p -> 'total')::numeric;
    END IF;
    IF jsonb_typeof(p -> 'lines') = 'array' AND jsonb_array_length(p -> 'lines') > 0 THEN
        SELECT sum(coalesce(nullif(ordersync_scalar(l -> 'quantity'), '')::numeric, 0)
                 * coalesce(nullif(ordersync_scalar(l -> 'price'), '')::numeric, 0))
        INTO total FROM jsonb_array_elements(p -> 'lines') l;
        RETURN total;
    END IF;
    RETURN NULL;
END
$$;

-- What the broad search looks in, lower-cased: key, 1C's external id
-- (<source>:<external id>), the marketplace's number, internal id and fetched id, the
-- customer's name and phone digits, and 1C's number and ref once there is a result.
CREATE FUNCTION ordersync_search_text(k text, src text, ext text, p jsonb, r jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lower(k || ' ' || src || ':' || ext
        || ' ' || ordersync_scalar(p -> 'number')
        || ' ' || ordersync_scalar(p -> 'marketplace_id')
        || ' ' || ordersync_scalar(p -> 'fetch' -> 'id')
        || ' ' || ordersync_scalar(p -> 'customer' -> 'name')
        || ' ' || regexp_replace(ordersync_scalar(p -> 'customer' -> 'phone'), '[^0-9]', '', 'g')
        || CASE WHEN r IS NOT NULL THEN ' ' || ordersync_scalar(r -> 'number') || ' ' || ordersync_scalar(r -> 'ref') ELSE '' END)
$$;

ALTER TABLE operations
    ADD COLUMN order_created_at timestamptz GENERATED ALWAYS AS (ordersync_order_created_at(payload)) STORED,
    ADD COLUMN order_total numeric GENERATED ALWAYS AS (ordersync_order_total(payload)) STORED,
    ADD COLUMN currency text GENERATED ALWAYS AS (ordersync_scalar(payload -> 'currency')) STORED,
    ADD COLUMN search_text text GENERATED ALWAYS AS (ordersync_search_text(key, source, external_id, payload, result)) STORED,
    ADD COLUMN onec_seen jsonb;

-- The list's period by the order's date.
CREATE INDEX operations_ordered_idx ON operations ((coalesce(order_created_at, created_at)));

-- The broad search is a substring search (LIKE '%term%'): a trigram index answers it
-- when the server has the pg_trgm extension (PostgreSQL's contrib; a trusted
-- extension, so the database's owner may create it). It is created in public, where
-- every schema of the database finds it, unless it is there already; the operator
-- class is named by its schema, so the index does not depend on search_path. Without
-- the extension the search reads the journal's rows; nothing else changes.
DO $$
DECLARE
    nsp text;
BEGIN
    SELECT n.nspname INTO nsp FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pg_trgm';
    IF nsp IS NULL THEN
        BEGIN
            IF EXISTS (SELECT FROM pg_namespace WHERE nspname = 'public') THEN
                CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;
            ELSE
                CREATE EXTENSION IF NOT EXISTS pg_trgm;
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'pg_trgm is not available (%): the journal''s broad search reads every row', SQLERRM;
        END;
        SELECT n.nspname INTO nsp FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'pg_trgm';
    END IF;
    IF nsp IS NOT NULL THEN
        EXECUTE format('CREATE INDEX operations_search_text_idx ON operations USING gin (search_text %I.gin_trgm_ops)', nsp);
    END IF;
END
$$;

-- diff_step(call) for test/sql/117_lease_rule_differential.sql: runs CALL (a format() string, %1$L
-- the resource prefix) once with fencelock.direct_path on, on resources 'd:...', and once off,
-- on 's:...'; answers the first answer and whether both answers and both paths' lease and history
-- rows agree (or both of everything, when they do not), and the direct path's rows of the
-- resources CALL names.  The lease table's later columns and the history are read where the
-- database's version has them.  Rows: resource owner fence [granted_how lock_delay] [bound] holder
-- live|over, then the history: resource fence owner granted_how ended_how|open.
CREATE FUNCTION diff_rows(p text, names text[] DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  leases text;
  history text;
BEGIN
  SELECT string_agg(concat_ws(' ', substr(j ->> 'resource', 3), coalesce(j ->> 'owner', '-'),
           j ->> 'fence', j ->> 'granted_how', j ->> 'lock_delay',
           CASE WHEN j ->> 'session_id' IS NOT NULL THEN 'bound' END, j ->> 'holder',
           CASE WHEN (j ->> 'expires_at')::timestamptz > clock_timestamp() THEN 'live'
                ELSE 'over' END), '; ' ORDER BY j ->> 'resource')
    INTO leases
    FROM (SELECT to_jsonb(l) AS j FROM fencelock.lease AS l WHERE l.resource LIKE p || ':%'
           AND (names IS NULL OR substr(l.resource, 3) = ANY (names))) AS s;
  IF to_regclass('fencelock.history') IS NOT NULL THEN
    EXECUTE $q$SELECT string_agg(concat_ws(' ', substr(h.resource, 3), h.fence, h.owner,
                 h.granted_how, coalesce(h.ended_how, 'open')), '; ' ORDER BY h.resource, h.fence)
               FROM fencelock.history AS h WHERE h.resource LIKE $1 || ':%'
                AND ($2 IS NULL OR substr(h.resource, 3) = ANY ($2))$q$
      INTO history USING p, names;
  END IF;
  RETURN concat_ws(' / ', leases, history);
END $$;

CREATE FUNCTION diff_step(call text) RETURNS TABLE (answer text, agree boolean, "rows" text)
LANGUAGE plpgsql AS $$
DECLARE
  a text[] := '{}';
  r text[] := '{}';
  x text;
BEGIN
  FOREACH x IN ARRAY ARRAY['d', 's'] LOOP
    PERFORM set_config('fencelock.direct_path', CASE x WHEN 'd' THEN 'on' ELSE 'off' END, true);
    BEGIN
      EXECUTE 'SELECT (' || format(call, x || ':') || ')::text' INTO answer;
    EXCEPTION WHEN OTHERS THEN
      answer := 'ERROR ' || SQLSTATE || ': ' || replace(SQLERRM, '"' || x || ':', '"');
    END;
    a := a || coalesce(answer, 'NULL');
    r := r || coalesce(diff_rows(x), '');
  END LOOP;
  PERFORM set_config('fencelock.direct_path', 'on', true);
  agree := a[1] = a[2] AND r[1] = r[2];
  answer := CASE WHEN agree THEN a[1]
                 ELSE format('direct: %s [%s] statement: %s [%s]', a[1], r[1], a[2], r[2]) END;
  "rows" := diff_rows('d', ARRAY(SELECT m[1] FROM regexp_matches(call, $r$\|\| '([a-z]+)'$r$, 'g') AS m));
  RETURN NEXT;
END $$;

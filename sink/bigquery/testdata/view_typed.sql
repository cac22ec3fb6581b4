CREATE OR REPLACE VIEW `my-project.formsync.form_typed`
OPTIONS(description = 'formsync: the submissions of one form, a column per field; formsync replaces this view when the fields of the form or their types change. Definition e0aff0df32a9c7078e2d5f8d') AS
SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
  t_boolean[OFFSET(0)].v AS `agreed`,
  t_integer[OFFSET(0)].v AS `age`,
  t_decimal[OFFSET(0)].v AS `price`,
  t_date[OFFSET(0)].v AS `born`,
  t_timestamp[OFFSET(0)].v AS `seen_at_57499a29`,
  t_array[OFFSET(0)].v AS `colours`,
  t_string[OFFSET(0)].v AS `notes`,
  t_boolean[OFFSET(1)].v AS `say__yes__54dd9c30`,
  t_integer[OFFSET(1)].v AS `back_slash_1498e0b5`,
  t_decimal[OFFSET(1)].v AS `f__quoted__272fca25`,
  t_date[OFFSET(1)].v AS `it_s__a__date_ff31a568`,
  t_timestamp[OFFSET(1)].v AS `tick_tock__ed4ac521`,
  t_array[OFFSET(1)].v AS `path___14b1fc6a`,
  t_string[OFFSET(1)].v AS `f___a9253dc8`,
  t_date[OFFSET(2)].v AS `email_969ccbd3`,
  t_array[OFFSET(2)].v AS `email`,
  t_timestamp[OFFSET(2)].v AS `f__n_c_d____a6745d77`,
  t_string[OFFSET(2)].v AS `no_value_yet_4c5deb28`
FROM (
  SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
    ARRAY(SELECT AS STRUCT SAFE_CAST(JSON_VALUE(m) AS BOOL) AS v FROM UNNEST([
      JSON_QUERY(d, '$."agreed"'),
      TO_JSON_STRING(fields['say "yes"'])
    ]) AS m WITH OFFSET AS o ORDER BY o) AS t_boolean,
    ARRAY(SELECT AS STRUCT (SELECT SAFE_CAST(v AS INT64) FROM UNNEST([JSON_VALUE(m)]) AS v WHERE REGEXP_CONTAINS(v, r'^-?(0|[1-9][0-9]*)$')) AS v FROM UNNEST([
      JSON_QUERY(d, '$."age"'),
      TO_JSON_STRING(fields['back\\slash'])
    ]) AS m WITH OFFSET AS o ORDER BY o) AS t_integer,
    ARRAY(SELECT AS STRUCT (SELECT n FROM UNNEST([JSON_VALUE(m)]) AS v, UNNEST([SAFE_CAST(v AS NUMERIC)]) AS n WHERE REGEXP_CONTAINS(v, r'^-?(0|[1-9][0-9]{0,28})(\.[0-9]{1,9})?$') OR NOT STARTS_WITH(m, '"') AND REGEXP_CONTAINS(v, r'^-?[0-9]+(\.[0-9]+)?e[+-][0-9]+$') AND SAFE_CAST(n AS FLOAT64) = SAFE_CAST(v AS FLOAT64)) AS v FROM UNNEST([
      JSON_QUERY(d, '$."price"'),
      TO_JSON_STRING(fields['"quoted"'])
    ]) AS m WITH OFFSET AS o ORDER BY o) AS t_decimal,
    ARRAY(SELECT AS STRUCT (SELECT SAFE_CAST(v AS DATE) FROM UNNEST([JSON_VALUE(m)]) AS v WHERE REGEXP_CONTAINS(v, r'^[0-9]{4}-[0-9]{2}-[0-9]{2}$')) AS v FROM UNNEST([
      JSON_QUERY(d, '$."born"'),
      TO_JSON_STRING(fields['it\'s "a" date']),
      JSON_QUERY(d, '$."Email"')
    ]) AS m WITH OFFSET AS o ORDER BY o) AS t_date,
    ARRAY(SELECT AS STRUCT (SELECT SAFE_CAST(IF(LENGTH(v) = 10, CONCAT(v, ' 00:00:00+00:00'), IF(REGEXP_CONTAINS(v, r'(Z|[+-][0-9]{2}:[0-9]{2})$'), v, CONCAT(v, '+00:00'))) AS TIMESTAMP) FROM UNNEST([JSON_VALUE(m)]) AS v WHERE REGEXP_CONTAINS(v, r'^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9]|[+-]14:00)?)?$')) AS v FROM UNNEST([
      JSON_QUERY(d, '$."seen at"'),
      TO_JSON_STRING(fields['tick`tock\\']),
      JSON_QUERY(d, '$."\u00fcn\u00efc\u00f8d\u00e9 \u2713"')
    ]) AS m WITH OFFSET AS o ORDER BY o) AS t_timestamp,
    ARRAY(SELECT AS STRUCT COALESCE((SELECT ARRAY_AGG(e ORDER BY o) FROM UNNEST(JSON_VALUE_ARRAY(m)) AS e WITH OFFSET AS o HAVING COUNTIF(e IS NULL) = 0), []) AS v FROM UNNEST([
      JSON_QUERY(d, '$."colours"'),
      TO_JSON_STRING(fields['path\\"']),
      JSON_QUERY(d, '$."email"')
    ]) AS m WITH OFFSET AS o ORDER BY o) AS t_array,
    ARRAY(SELECT AS STRUCT IF(STARTS_WITH(m, '"'), JSON_VALUE(m), NULLIF(m, 'null')) AS v FROM UNNEST([
      JSON_QUERY(d, '$."notes"'),
      TO_JSON_STRING(fields['\\']),
      JSON_QUERY(d, '$."no value yet"')
    ]) AS m WITH OFFSET AS o ORDER BY o) AS t_string
  FROM `my-project.formsync.submissions`, UNNEST([COALESCE(fields_text, TO_JSON_STRING(fields))]) AS d
  WHERE form_id = 'typed' AND deleted_at IS NULL AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
)

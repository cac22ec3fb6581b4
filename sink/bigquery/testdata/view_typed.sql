CREATE OR REPLACE VIEW `my-project.formsync.form_typed`
OPTIONS(description = 'formsync: the submissions of one form, a column per field; formsync replaces this view when the fields of the form or their types change. Definition 0979c1bae9fccb9b0cd34d33') AS
SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
  SAFE_CAST(JSON_VALUE(m0) AS BOOL) AS `agreed`,
  (SELECT SAFE_CAST(v AS INT64) FROM UNNEST([JSON_VALUE(m1)]) AS v WHERE REGEXP_CONTAINS(v, r'^-?(0|[1-9][0-9]*)$')) AS `age`,
  (SELECT n FROM UNNEST([JSON_VALUE(m2)]) AS v, UNNEST([SAFE_CAST(v AS NUMERIC)]) AS n WHERE REGEXP_CONTAINS(v, r'^-?(0|[1-9][0-9]{0,28})(\.[0-9]{1,9})?$') OR NOT STARTS_WITH(m2, '"') AND REGEXP_CONTAINS(v, r'^-?[0-9]+(\.[0-9]+)?e[+-][0-9]+$') AND SAFE_CAST(n AS FLOAT64) = SAFE_CAST(v AS FLOAT64)) AS `price`,
  (SELECT SAFE_CAST(v AS DATE) FROM UNNEST([JSON_VALUE(m3)]) AS v WHERE REGEXP_CONTAINS(v, r'^[0-9]{4}-[0-9]{2}-[0-9]{2}$')) AS `born`,
  (SELECT SAFE_CAST(IF(LENGTH(v) = 10, CONCAT(v, ' 00:00:00+00:00'), IF(REGEXP_CONTAINS(v, r'(Z|[+-][0-9]{2}:[0-9]{2})$'), v, CONCAT(v, '+00:00'))) AS TIMESTAMP) FROM UNNEST([JSON_VALUE(m4)]) AS v WHERE REGEXP_CONTAINS(v, r'^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9]|[+-]14:00)?)?$')) AS `seen_at_57499a29`,
  COALESCE((SELECT ARRAY_AGG(e ORDER BY o) FROM UNNEST(JSON_VALUE_ARRAY(m5)) AS e WITH OFFSET AS o HAVING COUNTIF(e IS NULL) = 0), []) AS `colours`,
  IF(STARTS_WITH(m6, '"'), JSON_VALUE(m6), NULLIF(m6, 'null')) AS `notes`,
  SAFE_CAST(JSON_VALUE(m7) AS BOOL) AS `say__yes__54dd9c30`,
  (SELECT SAFE_CAST(v AS INT64) FROM UNNEST([JSON_VALUE(m8)]) AS v WHERE REGEXP_CONTAINS(v, r'^-?(0|[1-9][0-9]*)$')) AS `back_slash_1498e0b5`,
  (SELECT n FROM UNNEST([JSON_VALUE(m9)]) AS v, UNNEST([SAFE_CAST(v AS NUMERIC)]) AS n WHERE REGEXP_CONTAINS(v, r'^-?(0|[1-9][0-9]{0,28})(\.[0-9]{1,9})?$') OR NOT STARTS_WITH(m9, '"') AND REGEXP_CONTAINS(v, r'^-?[0-9]+(\.[0-9]+)?e[+-][0-9]+$') AND SAFE_CAST(n AS FLOAT64) = SAFE_CAST(v AS FLOAT64)) AS `f__quoted__272fca25`,
  (SELECT SAFE_CAST(v AS DATE) FROM UNNEST([JSON_VALUE(m10)]) AS v WHERE REGEXP_CONTAINS(v, r'^[0-9]{4}-[0-9]{2}-[0-9]{2}$')) AS `it_s__a__date_ff31a568`,
  (SELECT SAFE_CAST(IF(LENGTH(v) = 10, CONCAT(v, ' 00:00:00+00:00'), IF(REGEXP_CONTAINS(v, r'(Z|[+-][0-9]{2}:[0-9]{2})$'), v, CONCAT(v, '+00:00'))) AS TIMESTAMP) FROM UNNEST([JSON_VALUE(m11)]) AS v WHERE REGEXP_CONTAINS(v, r'^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9]|[+-]14:00)?)?$')) AS `tick_tock__ed4ac521`,
  COALESCE((SELECT ARRAY_AGG(e ORDER BY o) FROM UNNEST(JSON_VALUE_ARRAY(m12)) AS e WITH OFFSET AS o HAVING COUNTIF(e IS NULL) = 0), []) AS `path___14b1fc6a`,
  IF(STARTS_WITH(m13, '"'), JSON_VALUE(m13), NULLIF(m13, 'null')) AS `f___a9253dc8`,
  (SELECT SAFE_CAST(v AS DATE) FROM UNNEST([JSON_VALUE(m14)]) AS v WHERE REGEXP_CONTAINS(v, r'^[0-9]{4}-[0-9]{2}-[0-9]{2}$')) AS `email_969ccbd3`,
  COALESCE((SELECT ARRAY_AGG(e ORDER BY o) FROM UNNEST(JSON_VALUE_ARRAY(m15)) AS e WITH OFFSET AS o HAVING COUNTIF(e IS NULL) = 0), []) AS `email`,
  (SELECT SAFE_CAST(IF(LENGTH(v) = 10, CONCAT(v, ' 00:00:00+00:00'), IF(REGEXP_CONTAINS(v, r'(Z|[+-][0-9]{2}:[0-9]{2})$'), v, CONCAT(v, '+00:00'))) AS TIMESTAMP) FROM UNNEST([JSON_VALUE(m16)]) AS v WHERE REGEXP_CONTAINS(v, r'^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9]|[+-]14:00)?)?$')) AS `f__n_c_d____a6745d77`,
  IF(STARTS_WITH(m17, '"'), JSON_VALUE(m17), NULLIF(m17, 'null')) AS `no_value_yet_4c5deb28`
FROM (
  SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
    JSON_QUERY(d, '$."agreed"') AS m0,
    JSON_QUERY(d, '$."age"') AS m1,
    JSON_QUERY(d, '$."price"') AS m2,
    JSON_QUERY(d, '$."born"') AS m3,
    JSON_QUERY(d, '$."seen at"') AS m4,
    JSON_QUERY(d, '$."colours"') AS m5,
    JSON_QUERY(d, '$."notes"') AS m6,
    TO_JSON_STRING(fields['say "yes"']) AS m7,
    TO_JSON_STRING(fields['back\\slash']) AS m8,
    TO_JSON_STRING(fields['"quoted"']) AS m9,
    TO_JSON_STRING(fields['it\'s "a" date']) AS m10,
    TO_JSON_STRING(fields['tick`tock\\']) AS m11,
    TO_JSON_STRING(fields['path\\"']) AS m12,
    TO_JSON_STRING(fields['\\']) AS m13,
    JSON_QUERY(d, '$."Email"') AS m14,
    JSON_QUERY(d, '$."email"') AS m15,
    JSON_QUERY(d, '$."\u00fcn\u00efc\u00f8d\u00e9 \u2713"') AS m16,
    JSON_QUERY(d, '$."no value yet"') AS m17
  FROM `my-project.formsync.submissions`, UNNEST([COALESCE(fields_text, TO_JSON_STRING(fields))]) AS d
  WHERE form_id = 'typed' AND deleted_at IS NULL AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
)

CREATE OR REPLACE VIEW `my-project.formsync.form_contact_form_8d9be2fa`
OPTIONS(description = 'formsync: the submissions of one form, a column per field; formsync replaces this view when the fields of the form or their types change. Definition 146885e54da56e59c5f6c80f') AS
SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
  t_string[OFFSET(0)].v AS `email_969ccbd3`,
  t_string[OFFSET(1)].v AS `message`,
  t_string[OFFSET(2)].v AS `order`
FROM (
  SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
    ARRAY(SELECT AS STRUCT IF(STARTS_WITH(m, '"'), JSON_VALUE(m), NULLIF(m, 'null')) AS v FROM UNNEST([
      JSON_QUERY(d, '$."Email"'),
      JSON_QUERY(d, '$."message"'),
      JSON_QUERY(d, '$."order"')
    ]) AS m WITH OFFSET AS o ORDER BY o) AS t_string
  FROM `my-project.formsync.submissions`, UNNEST([COALESCE(fields_text, TO_JSON_STRING(fields))]) AS d
  WHERE form_id = 'contact-form' AND deleted_at IS NULL AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
)

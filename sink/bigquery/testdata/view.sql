CREATE OR REPLACE VIEW `my-project.formsync.form_contact_form_8d9be2fa`
OPTIONS(description = 'formsync: the submissions of one form, a column per field; formsync replaces this view when the fields of the form or their types change. Definition 8c195fd064c5dfb12da059a3') AS
SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
  IF(STARTS_WITH(m0, '"'), JSON_VALUE(m0), NULLIF(m0, 'null')) AS `email_969ccbd3`,
  IF(STARTS_WITH(m1, '"'), JSON_VALUE(m1), NULLIF(m1, 'null')) AS `message`,
  IF(STARTS_WITH(m2, '"'), JSON_VALUE(m2), NULLIF(m2, 'null')) AS `order`
FROM (
  SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
    JSON_QUERY(d, '$."Email"') AS m0,
    JSON_QUERY(d, '$."message"') AS m1,
    JSON_QUERY(d, '$."order"') AS m2
  FROM `my-project.formsync.submissions`, UNNEST([COALESCE(fields_text, TO_JSON_STRING(fields))]) AS d
  WHERE form_id = 'contact-form' AND deleted_at IS NULL AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'
)

CREATE OR REPLACE VIEW `my-project.formsync.form_contact_form_8d9be2fa`
OPTIONS(description = 'formsync: the submissions of one form, a column per field; formsync replaces this view when the fields of the form or their types change. Definition 9027af477dc93a448a2c2608') AS
SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
  IF(JSON_TYPE(fields['Email']) IN ('object', 'array'), IF(fields_text IS NULL, TO_JSON_STRING(fields['Email']), JSON_QUERY(fields_text, '$."Email"')), IF(fields_text IS NULL, JSON_VALUE(fields['Email']), JSON_VALUE(fields_text, '$."Email"'))) AS `email_969ccbd3`,
  IF(JSON_TYPE(fields['message']) IN ('object', 'array'), IF(fields_text IS NULL, TO_JSON_STRING(fields['message']), JSON_QUERY(fields_text, '$."message"')), IF(fields_text IS NULL, JSON_VALUE(fields['message']), JSON_VALUE(fields_text, '$."message"'))) AS `message`,
  IF(JSON_TYPE(fields['order']) IN ('object', 'array'), IF(fields_text IS NULL, TO_JSON_STRING(fields['order']), JSON_QUERY(fields_text, '$."order"')), IF(fields_text IS NULL, JSON_VALUE(fields['order']), JSON_VALUE(fields_text, '$."order"'))) AS `order`
FROM `my-project.formsync.submissions`
WHERE form_id = 'contact-form' AND deleted_at IS NULL AND created_at BETWEEN TIMESTAMP '0001-01-01 00:00:00+00' AND TIMESTAMP '9999-12-31 23:59:59.999999+00'

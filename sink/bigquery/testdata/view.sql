CREATE OR REPLACE VIEW `my-project.formsync.form_contact_form_8d9be2fa`
OPTIONS(description = 'formsync: the submissions of one form, a column per field; formsync replaces this view when the fields of the form change. Definition 230b981c2d9d335d33b6c8f3') AS
SELECT form_id, submission_id, submission_key, created_at, is_spam, synced_at,
  JSON_VALUE(fields['Email']) AS `email_969ccbd3`,
  JSON_VALUE(fields['message']) AS `message`,
  JSON_VALUE(fields['order']) AS `order`
FROM `my-project.formsync.submissions`
WHERE form_id = 'contact-form' AND deleted_at IS NULL

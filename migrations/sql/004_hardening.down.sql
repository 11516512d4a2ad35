DROP TABLE hookline_content_keys;

DROP TABLE hookline_instances;

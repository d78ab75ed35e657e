-- PostgreSQL 18's pg_get_loaded_modules() names the library and its version (the magic block of
-- src/compat.h FL_MODULE_MAGIC): the loaded library is the version the extension's control file
-- names.  (Left out on older majors.)
SELECT module_name,
       version = (SELECT default_version FROM pg_available_extensions WHERE name = 'fencelock')
           AS version_matches_control_file
  FROM pg_get_loaded_modules()
 WHERE file_name LIKE 'fencelock%';

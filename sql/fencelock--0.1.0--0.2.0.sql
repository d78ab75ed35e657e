-- fencelock 0.1.0 -> 0.2.0: task-table claiming; waiting, several resources, statistics, history.
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.2.0'" to load this file. \quit

-- == task-table claiming ==

-- == waiting, acquire_all, statistics and history ==

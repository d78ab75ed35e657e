-- fencelock 0.3.0 -> 0.4.0: the second hardening round (issue 20).
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.4.0'" to load this file. \quit

"""The book tool beside the library: it trains the plan's runs (:mod:`rote.build.engine`, estimates in
:mod:`rote.build.timings`), executes the chapters (:mod:`rote.build.driver`), stages and publishes the site
(:mod:`rote.build.staging`, :mod:`rote.build.site`, :mod:`rote.build.frontpage`, :mod:`rote.build.provenance`,
:mod:`rote.build.reference`, :mod:`rote.build.publish`), runs protocol 10's stability build
(:mod:`rote.build.book`) and gives the command line (:mod:`rote.build.cli`, its arguments in
:mod:`rote.build.arguments`). It imports the library (:mod:`rote`); the library never imports it."""

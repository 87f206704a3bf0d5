from roadmap_cli.entry import main

main()

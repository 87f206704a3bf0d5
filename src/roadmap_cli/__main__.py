from roadmap_cli.cli import main

main()

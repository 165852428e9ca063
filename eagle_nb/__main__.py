from eagle_nb.cli.main import main

main()
